"""A one-node Slurm cluster whose jobs are real local processes.

This is the stateful heart of the emulator: it keeps the live queue, the accounting history and
the node's CPUs/GPUs, and runs each job's script in its own process group so that cancel, time
limits and signals behave like on a real cluster. Everything runs on one asyncio loop; callers
never touch it from another thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import itertools
import logging
import os
import pwd
import shutil
import signal
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .jobdesc import JobRequest
from .scontrol_standin import STATE_DIR_ENV, record_file

log = logging.getLogger("slurmapi_emulator.model")

SCHEDULE_DELAY = 0.05  # seconds between a submit and the scheduler pass, so PENDING is observable
FINISHED_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"})
MAX_ARRAY_TASK_ID = 1000  # Slurm's default MaxArraySize is 1001: task ids 0-1000


@dataclass(frozen=True)
class JobExit:
    """How an emulated job (or its batch step) ended, in Slurm's terms; rendered as its `exit_code`."""

    status: str = "SUCCESS"
    return_code: int | None = 0
    signal: int | None = None


@dataclass(eq=False)
class Job:
    """One submitted job: request, placement, timeline and process."""

    job_id: int
    req: JobRequest
    partition: str
    user: str
    uid: int
    group: str
    gid: int
    cwd: str  # as requested (reported by Slurm)
    run_cwd: str  # where the process really runs
    stdout_pattern: str
    stderr_pattern: str
    stdin_path: str
    stdout_path: str
    stderr_path: str
    submit: float
    start: float | None = None
    end: float | None = None
    state: str = "PENDING"
    reason: str = "None"
    description: str = ""
    completing: bool = False
    exit: JobExit = JobExit()
    job_exit_history: JobExit = JobExit()
    step_state: str = ""
    step_exit: JobExit = JobExit()
    kill_user: str = ""
    bad_constraints: bool = False
    in_live_queue: bool = True
    cpu_ids: list[int] = field(default_factory=list)
    released: bool = False  # its CPUs and GPUs given back, its purge scheduled
    gpu_ids: list[int] = field(default_factory=list)
    proc: asyncio.subprocess.Process | None = None
    minute_seconds: float = 60.0  # real seconds per minute of time_limit
    rev: int = 0
    cache: dict[str, tuple[int, str]] = field(default_factory=dict)
    timers: list[asyncio.TimerHandle] = field(default_factory=list)
    extra: str = ""  # what the job set with `scontrol update JobId=N Extra=...` (the stand-in)
    state_dir: Path | None = None  # where the stand-in writes; None once the job's process is over
    record_stamp: tuple[int, int] | None = None
    # The peak resident memory of the job's process, in bytes, sampled while it runs (as
    # jobacct_gather samples it): the history's MaxRSS. None until sampled.
    max_rss_bytes: int | None = None
    # Job arrays, as slurmctld keeps them: every task record has the array's id; the meta record (job
    # id = array id) lists the tasks still waiting until the last one starts and takes it over.
    array_job_id: int = 0
    array_task_id: int | None = None
    array_pending: list[int] = field(default_factory=list)
    array_throttle: int = 0
    array_all: list[int] = field(default_factory=list)

    @property
    def is_array_meta(self) -> bool:
        """The record that still stands for waiting tasks of an array."""
        return bool(self.array_job_id) and self.array_task_id is None

    @property
    def name(self) -> str:
        return self.req.name

    @property
    def cpus(self) -> int:
        return self.req.cpus

    @property
    def gpus(self) -> int:
        return self.req.gpus

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    @property
    def job_state(self) -> list[str]:
        """Live `job_state`: base state plus flags."""
        return [self.state, "COMPLETING"] if self.completing else [self.state]

    def sample_rss(self) -> None:
        """Read the peak RSS (``VmHWM``) of the job's process while it runs; keep the largest seen."""
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                fields = line.split()
                if len(fields) >= 2 and fields[1].isdigit():
                    peak = int(fields[1]) * 1024
                    if self.max_rss_bytes is None or peak > self.max_rss_bytes:
                        self.max_rss_bytes = peak
                return

    def refresh_record(self) -> None:
        """Take in what the job wrote into its own record through the ``scontrol`` stand-in."""
        self.sample_rss()
        if self.state_dir is None:
            return
        path = record_file(self.state_dir, self.job_id, "extra")
        try:
            info = path.stat()
        except OSError:
            return
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp != self.record_stamp:
            self.record_stamp = stamp
            with contextlib.suppress(OSError):
                self.extra = path.read_bytes().decode("utf-8", "replace")
                self.touch()
        if self.proc is not None and self.proc.returncode is not None:
            self.state_dir = None  # the job's processes are gone: nothing more will be written

    def touch(self) -> None:
        """Mark the job changed so cached renderings are rebuilt."""
        self.rev += 1


@contextlib.contextmanager
def _open_for_job(path: str, *, write: bool, append: bool) -> Iterator[int]:
    """A file descriptor of a job's stdout/stderr (``write``) or stdin, closed on exit.

    Opened non-blocking, so a FIFO nobody reads (or writes) fails or opens at once instead of
    stopping the emulator's one event loop; the descriptor is made blocking again for the job.
    """
    flags = os.O_NONBLOCK | os.O_CLOEXEC
    flags |= (os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)) if write else os.O_RDONLY
    fd = os.open(path, flags, 0o666)
    try:
        os.set_blocking(fd, True)
        yield fd
    finally:
        os.close(fd)


def expand_pattern(
    pattern: str, job_id: int, name: str, user: str, array_job_id: int = 0, array_task_id: int | None = None
) -> str:
    """Expand the filename patterns Slurm supports in standard_output/error (%j, %x, %u, %A, %a, ...)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "%" and i + 1 < len(pattern):
            code = pattern[i + 1]
            repl = {
                "j": str(job_id),
                "A": str(array_job_id or job_id),
                "a": str(array_task_id) if array_task_id is not None else "4294967294",
                "x": name,
                "u": user,
                "N": "localhost",
                "n": "0",
                "t": "0",
                "s": "batch",
                "%": "%",
            }.get(code)
            if repl is not None:
                out.append(repl)
                i += 2
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_array(text: str) -> tuple[list[int], int]:
    """``"0-9:2,15%4"`` -> task ids and the throttle (0: none); ValueError when Slurm would refuse it."""
    spec, _, throttle = text.partition("%")
    ids: list[int] = []
    for part in spec.split(","):
        first, dash, rest = part.strip().partition("-")
        last, _, step = rest.partition(":")
        if not first.isdigit() or (dash and not last.isdigit()) or (step and not step.isdigit()):
            raise ValueError(text)
        lo, hi = int(first), int(last) if dash else int(first)
        if hi < lo or hi > MAX_ARRAY_TASK_ID or (step and int(step) < 1):
            raise ValueError(text)
        ids.extend(range(lo, hi + 1, int(step) if step else 1))
    if not ids or (throttle and not throttle.isdigit()):
        raise ValueError(text)
    return sorted(set(ids)), int(throttle) if throttle else 0


class Cluster:
    """The emulated cluster: one node, a live queue, an accounting database, a scheduler."""

    def __init__(
        self,
        *,
        workdir: Path,
        partitions: list[str],
        cpus: int,
        gpus: int,
        min_job_age: float,
        history_delay: float,
        minute_seconds: float,
        kill_wait: float,
        cluster_name: str = "emulator",
        history_comments: bool = True,
    ) -> None:
        self.history_comments = history_comments
        self.workdir = workdir
        self.partitions = list(partitions)
        self.total_cpus = cpus
        self.total_gpus = gpus
        self.min_job_age = min_job_age
        self.history_delay = history_delay
        self.minute_seconds = minute_seconds
        self.kill_wait = kill_wait
        self.cluster_name = cluster_name
        self.next_id = 1
        self.jobs: dict[int, Job] = {}  # every job ever created, by id
        self.live: dict[int, Job] = {}  # the slurmctld queue
        self.pending: dict[int, Job] = {}
        self.free_cpus = set(range(cpus))
        self.free_gpus = set(range(gpus))
        self.last_update = int(time.time())
        self._schedule_handle: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.uid = os.getuid()
        try:
            self.group = grp.getgrgid(os.getgid()).gr_name
        except KeyError:
            self.group = str(os.getgid())
        self.gid = os.getgid()
        self.bash = shutil.which("bash") or "/bin/bash"
        (self.workdir / ".emulator").mkdir(parents=True, exist_ok=True)
        self.bin_dir = self._install_scontrol()

    def _install_scontrol(self) -> Path:
        """The ``scontrol`` stand-in on every job's PATH (a job writes its own ``Extra`` with it)."""
        import sys

        from . import scontrol_standin

        bin_dir = self.workdir / ".emulator" / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        command = bin_dir / "scontrol"
        command.write_text(f"#!{sys.executable}\n" + Path(scontrol_standin.__file__).read_text())
        command.chmod(stat.S_IRWXU)
        return bin_dir

    # ---------------------------------------------------------------- bookkeeping
    def _changed(self, job: Job | None = None) -> None:
        if job is not None:
            job.touch()
        self.last_update = int(time.time())

    def use_job_id(self) -> int:
        """Consume a job id, as slurmctld does even for some failed submissions."""
        job_id = self.next_id
        self.next_id += 1
        return job_id

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    # ---------------------------------------------------------------- submission
    def create_job(self, req: JobRequest, partition: str, *, bad_constraints: bool = False) -> Job:
        """Create the job record (queue + history); it starts PENDING unless it can never run."""
        job_id = self.use_job_id()
        now = time.time()
        cwd = req.cwd or str(self.workdir)
        run_cwd = cwd if os.path.isdir(cwd) else str(self.workdir)

        def absolute(path: str) -> str:
            return path if os.path.isabs(path) else os.path.join(run_cwd, path)

        stdout_pattern = absolute(req.stdout or "slurm-%j.out")
        stderr_pattern = absolute(req.stderr) if req.stderr else ""
        stdout_path = expand_pattern(stdout_pattern, job_id, req.name, self.user)
        stderr_path = expand_pattern(stderr_pattern, job_id, req.name, self.user) if stderr_pattern else stdout_path
        job = Job(
            job_id=job_id,
            req=req,
            partition=partition,
            user=self.user,
            uid=self.uid,
            group=self.group,
            gid=self.gid,
            cwd=cwd,
            run_cwd=run_cwd,
            stdout_pattern=stdout_pattern,
            stderr_pattern=stderr_pattern,
            stdin_path=absolute(req.stdin) if req.stdin else "/dev/null",
            stdout_path=stdout_path,
            stderr_path=stderr_path,
            submit=now,
            minute_seconds=self.minute_seconds,
        )
        if req.array:
            job.array_job_id = job_id
            job.array_all = parse_array(req.array)[0]
            job.array_pending = list(job.array_all)
            job.array_throttle = parse_array(req.array)[1]
            self._set_paths(job)
        self.jobs[job_id] = job
        self.live[job_id] = job
        if bad_constraints:
            job.bad_constraints = True
            job.state = "FAILED"
            job.reason = "BadConstraints"
            job.start = job.end = now
            job.exit = JobExit("SIGNALED", None, 1)
            job.job_exit_history = JobExit("ERROR", 1, None)
            self._schedule_purge(job)
        else:
            if req.hold:
                job.reason = "JobHeldUser"
            self.pending[job_id] = job
            self.request_schedule()
        self._changed(job)
        return job

    def _set_paths(self, job: Job) -> None:
        """Expand the output paths with the job's own id and its array ids (``%A_%a``)."""
        ids = (job.job_id, job.name, self.user, job.array_job_id, job.array_task_id)
        job.stdout_path = expand_pattern(job.stdout_pattern, *ids)
        job.stderr_path = expand_pattern(job.stderr_pattern, *ids) if job.stderr_pattern else job.stdout_path

    def array_members(self, array_job_id: int) -> list[Job]:
        """The array's records still in the live queue: the meta record first, then tasks, newest first."""
        members = [job for job in self.live.values() if job.array_job_id == array_job_id]
        return sorted(members, key=lambda job: (job.job_id != array_job_id, -job.job_id))

    # ---------------------------------------------------------------- scheduling
    def request_schedule(self, delay: float = SCHEDULE_DELAY) -> None:
        """Run a scheduler pass soon; many requests in a burst give one pass."""
        if self._closing or self._schedule_handle is not None:
            return
        self._schedule_handle = self.loop.call_later(delay, self._schedule)

    def _schedule(self) -> None:
        """FIFO scheduler: start what fits; the first job that does not fit waits on Resources."""
        self._schedule_handle = None
        if self._closing:
            return
        blocked = False
        for job in list(self.pending.values()):
            if job.req.hold:
                continue
            if job.is_array_meta:
                blocked = self._schedule_array(job, blocked)
                continue
            if not blocked and job.cpus <= len(self.free_cpus) and job.gpus <= len(self.free_gpus):
                self._start(job)
                continue
            reason = "Priority" if blocked else "Resources"
            blocked = True
            if job.reason != reason:
                job.reason = reason
                self._changed(job)

    def _schedule_array(self, meta: Job, blocked: bool) -> bool:
        """Start the array's waiting tasks that fit, within its %N throttle; True if it blocks the queue."""
        while meta.array_pending:
            running = sum(1 for j in self.live.values() if j.array_job_id == meta.array_job_id and j.state == "RUNNING")
            if meta.array_throttle and running >= meta.array_throttle:
                reason = "JobArrayTaskLimit"
                break
            if blocked or meta.cpus > len(self.free_cpus) or meta.gpus > len(self.free_gpus):
                reason = "Priority" if blocked else "Resources"
                blocked = True
                break
            task_id = meta.array_pending.pop(0)
            if not meta.array_pending:  # the last task takes over the meta record
                meta.array_task_id = task_id
                self._set_paths(meta)
                self._start(meta)
                return blocked
            task = Job(
                job_id=self.use_job_id(),
                req=meta.req,
                partition=meta.partition,
                user=meta.user,
                uid=meta.uid,
                group=meta.group,
                gid=meta.gid,
                cwd=meta.cwd,
                run_cwd=meta.run_cwd,
                stdout_pattern=meta.stdout_pattern,
                stderr_pattern=meta.stderr_pattern,
                stdin_path=meta.stdin_path,
                stdout_path="",
                stderr_path="",
                submit=meta.submit,
                minute_seconds=meta.minute_seconds,
                array_job_id=meta.array_job_id,
                array_task_id=task_id,
                array_throttle=meta.array_throttle,
                array_all=meta.array_all,
            )
            self._set_paths(task)
            self.jobs[task.job_id] = task
            self.live[task.job_id] = task
            self.pending[task.job_id] = task
            self._start(task)
            self._changed(meta)
        if meta.reason != reason:
            meta.reason = reason
            self._changed(meta)
        return blocked

    def _start(self, job: Job) -> None:
        del self.pending[job.job_id]
        job.cpu_ids = sorted(self.free_cpus)[: job.cpus]
        job.gpu_ids = sorted(self.free_gpus)[: job.gpus]
        self.free_cpus.difference_update(job.cpu_ids)
        self.free_gpus.difference_update(job.gpu_ids)
        job.state = "RUNNING"
        job.reason = "None"
        job.start = time.time()
        if job.req.time_limit is not None:
            job.timers.append(self.loop.call_later(job.req.time_limit * self.minute_seconds, self._time_limit, job))
        self._changed(job)
        task = self.loop.create_task(self._run(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _environment(self, job: Job) -> dict[str, str]:
        env: dict[str, str] = {}
        for item in job.req.environment or []:
            key, sep, value = item.partition("=")
            if sep and key:
                env[key] = value
        env["PATH"] = f"{self.bin_dir}:{env.get('PATH') or os.defpath}"
        env[STATE_DIR_ENV] = str(self.workdir / ".emulator")
        env.update(
            SLURM_JOB_ID=str(job.job_id),
            SLURM_JOBID=str(job.job_id),
            SLURM_JOB_NAME=job.name,
            SLURM_JOB_PARTITION=job.partition,
            SLURM_SUBMIT_DIR=job.cwd,
            SLURM_JOB_USER=job.user,
            SLURM_CPUS_ON_NODE=str(job.cpus),
            SLURM_NTASKS=str(job.req.ntasks),
            SLURM_JOB_NUM_NODES="1",
            SLURM_JOB_NODELIST="localhost",
            SLURMD_NODENAME="localhost",
            SLURM_CLUSTER_NAME=self.cluster_name,
        )
        if job.array_job_id and job.array_task_id is not None:
            every = job.array_all or [job.array_task_id]
            steps = {b - a for a, b in itertools.pairwise(every)}
            env.update(
                SLURM_ARRAY_JOB_ID=str(job.array_job_id),
                SLURM_ARRAY_TASK_ID=str(job.array_task_id),
                SLURM_ARRAY_TASK_COUNT=str(len(every)),
                SLURM_ARRAY_TASK_MIN=str(min(every)),
                SLURM_ARRAY_TASK_MAX=str(max(every)),
                SLURM_ARRAY_TASK_STEP=str(steps.pop() if len(steps) == 1 else 1),
            )
        if job.gpu_ids:
            ids = ",".join(map(str, job.gpu_ids))
            env.update(CUDA_VISIBLE_DEVICES=ids, SLURM_JOB_GPUS=ids, SLURM_GPUS_ON_NODE=str(len(job.gpu_ids)))
        return env

    async def _run(self, job: Job) -> None:
        """Run the job's process; whatever goes wrong, the job ends and its CPUs and GPUs are freed."""
        try:
            await self._run_process(job)
        except Exception as exc:  # a job that cannot run fails; it never holds the node
            log.warning("job %s could not run: %s: %s", job.job_id, type(exc).__name__, exc)
            if job.state == "RUNNING":
                self._finish(job, "FAILED", "NonZeroExitCode", JobExit("ERROR", 1, None))
                job.step_state, job.step_exit = "FAILED", JobExit("ERROR", 1, None)
            if job.proc is not None and job.proc.returncode is None:
                self._signal_group(job, signal.SIGKILL)
            job.completing = False
            self._release(job)
            self._changed(job)

    async def _run_process(self, job: Job) -> None:
        """Write the script, start it in its own process group, and record how it ended."""
        script = self.workdir / ".emulator" / f"job{job.job_id}.sh"
        script.write_text(job.req.script)
        script.chmod(stat.S_IRWXU)
        argv = [str(script)] if job.req.script.startswith("#!") else [self.bash, str(script)]
        argv += job.req.argv[1:]
        append = job.req.open_mode == "append"
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(_open_for_job(job.stdout_path, write=True, append=append))
            err = (
                out
                if job.stderr_path == job.stdout_path
                else stack.enter_context(_open_for_job(job.stderr_path, write=True, append=append))
            )
            inp = stack.enter_context(_open_for_job(job.stdin_path, write=False, append=False))
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=job.run_cwd,
                env=self._environment(job),
                stdin=inp,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        job.proc = proc
        job.sample_rss()
        job.state_dir = self.workdir / ".emulator"
        if job.state != "RUNNING" or self._closing:  # cancelled, timed out or shut down meanwhile
            self._signal_group(job, signal.SIGKILL)
        returncode = await proc.wait()
        self._signal_group(job, signal.SIGKILL, after_exit=True)  # leftovers, as proctrack kills them
        job.refresh_record()  # what the script wrote last, before it ended
        self._exited(job, returncode)

    def _exited(self, job: Job, returncode: int) -> None:
        if job.state == "RUNNING":
            if returncode == 0:
                self._finish(job, "COMPLETED", "None", JobExit())
                job.step_state, job.step_exit = "COMPLETED", JobExit()
            elif returncode > 0:
                info = JobExit("ERROR", returncode, None)
                self._finish(job, "FAILED", "NonZeroExitCode", info)
                job.step_state, job.step_exit = "FAILED", info
            else:
                sig = -returncode
                info = JobExit("SIGNALED", None, sig)
                self._finish(job, "FAILED", "RaisedSignal", info)
                job.description = f"RaisedSignal:{sig}({signal.strsignal(sig) or sig})"
                job.step_state, job.step_exit = "CANCELLED", info
        job.completing = False
        self._release(job)
        self._changed(job)

    def _release(self, job: Job) -> None:
        """Give the job's CPUs and GPUs back (once: a second call finds nothing to free)."""
        if job.released:
            return
        job.released = True
        self.free_cpus.update(job.cpu_ids)
        self.free_gpus.update(job.gpu_ids)
        job.cpu_ids = []
        job.gpu_ids = []
        self._schedule_purge(job)
        self.request_schedule(0)

    def _finish(self, job: Job, state: str, reason: str, info: JobExit) -> None:
        job.state = state
        job.reason = reason
        job.end = time.time()
        job.exit = info
        job.job_exit_history = info
        for timer in job.timers:
            timer.cancel()
        job.timers.clear()
        self._changed(job)

    def _schedule_purge(self, job: Job) -> None:
        if not self._closing:
            delay = max(0.0, (job.end or time.time()) + self.min_job_age - time.time())
            self.loop.call_later(delay, self._purge, job)

    def _purge(self, job: Job) -> None:
        """Drop a finished job from the live queue after MinJobAge (history keeps it)."""
        if job.completing:
            self.loop.call_later(0.2, self._purge, job)
            return
        if self.live.pop(job.job_id, None) is not None:
            job.in_live_queue = False
            self._changed(job)

    def _signal_group(self, job: Job, sig: int, *, after_exit: bool = False) -> None:
        """Signal the job's whole process group (never a group whose leader was already reaped,
        except right after the reap, to kill what the script left behind)."""
        if job.proc is None or (job.proc.returncode is not None and not after_exit):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(job.proc.pid, sig)

    def _terminate(self, job: Job) -> None:
        """SIGTERM the job's process group now, SIGKILL after KillWait."""
        job.completing = job.proc is None or job.proc.returncode is None
        self._signal_group(job, signal.SIGCONT)
        self._signal_group(job, signal.SIGTERM)
        self.loop.call_later(self.kill_wait, self._signal_group, job, signal.SIGKILL)

    def _time_limit(self, job: Job) -> None:
        if job.state != "RUNNING":
            return
        info = JobExit("SIGNALED", None, signal.SIGTERM)
        self._finish(job, "TIMEOUT", "TimeLimit", info)
        job.job_exit_history = JobExit()
        job.step_state, job.step_exit = "CANCELLED", info
        self._terminate(job)
        self._changed(job)

    # ---------------------------------------------------------------- cancel
    def cancel_array(self, array_job_id: int, sig: int = signal.SIGKILL) -> bool:
        """Cancel or signal every task of an array (its id names them all); False if all had finished."""
        outcomes = [self.cancel(job, sig) for job in self.array_members(array_job_id)]
        return any(outcomes)

    def cancel(self, job: Job, sig: int = signal.SIGKILL) -> bool:
        """Cancel or signal a job; False if it had already finished (Slurm's 2021)."""
        if job.finished:
            return False
        if job.state == "PENDING":
            self.pending.pop(job.job_id, None)
            now = time.time()
            job.state = "CANCELLED"
            job.start = job.end = now
            job.kill_user = self.user
            job.exit = job.job_exit_history = JobExit()
            self._schedule_purge(job)
            self.request_schedule(0)
            self._changed(job)
            return True
        if sig != signal.SIGKILL:  # a plain signal: delivered, the job carries on (or dies of it)
            self._signal_group(job, sig)
            return True
        info = JobExit("SIGNALED", None, signal.SIGTERM)
        self._finish(job, "CANCELLED", "None", info)
        job.job_exit_history = JobExit()
        job.step_state, job.step_exit = "CANCELLED", info
        job.kill_user = self.user
        self._terminate(job)
        self._changed(job)
        return True

    # ---------------------------------------------------------------- shutdown
    async def shutdown(self) -> None:
        """Kill every job process group and wait for them, so nothing outlives the emulator."""
        self._closing = True
        if self._schedule_handle is not None:
            self._schedule_handle.cancel()
        for job in self.jobs.values():
            for timer in job.timers:
                timer.cancel()
            if job.proc is not None and job.proc.returncode is None:
                self._signal_group(job, signal.SIGKILL)
        # jobs still being started kill themselves once their process exists (see _run)
        if self._tasks:
            _done, pending = await asyncio.wait(list(self._tasks), timeout=10)
            for task in pending:
                task.cancel()
        for job in self.jobs.values():  # belt and braces
            if job.proc is not None and job.proc.returncode is None:
                self._signal_group(job, signal.SIGKILL)
