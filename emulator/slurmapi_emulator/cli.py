"""`slurmapi-emulator`: run the local Slurm Job API stand-in from a shell.

Prints the base URL on stdout once it listens (one line, easy to capture), logs one line per call
on stderr (method, path, status; never tokens; control characters escaped), and on SIGINT/SIGTERM
stops and kills the jobs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

from .auth import InsecureFileError
from .config import EmulatorConfig, is_loopback
from .faults import GRAMMAR_HELP, FaultSpecError, parse_fault
from .locations import DEFAULT_REGIONS
from .server import EmulatorServer
from .versions import DEFAULT_SLURM_RELEASE, SUPPORTED_VERSIONS, known_releases, versions_of

# The range of API versions, as the table of versions gives it (written nowhere else).
VERSION_RANGE = f"{SUPPORTED_VERSIONS[0]} .. {SUPPORTED_VERSIONS[-1]}"

DESCRIPTION = """\
A local stand-in of the Slurm Job API (POST ...:callSlurmRestApi): a one-node Slurm whose jobs run
as local processes, behind the same envelope, auth and errors as Google's API.
"""

EPILOG = f"""\
Point an Airflow Google Cloud connection at it
  1. start it with a service-account key it writes for you:
       slurmapi-emulator --port 8080 --write-credentials /tmp/emu-sa.json --minute-seconds 1
  2. create the connection (key_path works as well as keyfile_dict or
     GOOGLE_APPLICATION_CREDENTIALS=/tmp/emu-sa.json):
       airflow connections add slurm_emu --conn-type google_cloud_platform \\
         --conn-extra '{{"key_path": "/tmp/emu-sa.json", "project": "demo-project",
                        "api_endpoint": "http://127.0.0.1:8080"}}'
  3. in the DAG use gcp_conn_id="slurm_emu", a Google Cloud region (e.g. us-central1; --region
     sets them), any cluster id (restrict them with --cluster), partition "debug" (or one of
     --partitions), api_version "auto" or one the release serves ({DEFAULT_SLURM_RELEASE}:
     {", ".join(versions_of(DEFAULT_SLURM_RELEASE))}; --slurm-release 26.05 serves
     {", ".join(versions_of("26.05"))}; --api-versions all serves {VERSION_RANGE}).
  Google's token requests go to the emulator (the key's token_uri), so nothing leaves the machine.
  Quick curl test with a static token:
       slurmapi-emulator --token dev &
       curl -s -H 'Authorization: Bearer dev' -d '{{"method":"HTTP_METHOD_GET","path":"/slurm/v0.0.42/ping"}}' \\
         http://127.0.0.1:8080/v1beta1/projects/demo-project/locations/us-central1/modelDevelopmentClusters/c\
:callSlurmRestApi

Jobs: the script runs with bash (or its #! interpreter) in current_working_directory if it exists,
else in --workdir; output goes to standard_output (default <cwd>/slurm-%j.out). time_limit minutes
last --minute-seconds real seconds each. Finished jobs leave the live queue after --min-job-age
seconds and are then only in /slurmdb.

Safety: it runs the scripts it is sent, as you. It binds loopback only (--allow-remote to
override), answers only requests whose Host is localhost or a loopback address with its port
(421 otherwise: no DNS rebinding from a web page), cuts off slow or oversized requests, and
refuses a reused key or token file that another user owns or can read (chmod 600 it).

Test harness: send the header X-Emulator-Control-Token with the value written at start to
--control-token-file (default: <--write-credentials FILE>.control-token, mode 0600), else 401:
       curl -s -H "X-Emulator-Control-Token: $(cat /tmp/emu-sa.json.control-token)" \
         http://127.0.0.1:8080/_emulator/jobs
  GET  /_emulator/jobs           every job ever submitted
  GET  /_emulator/calls          envelope calls served, by kind, and the last ones
  POST /_emulator/calls/reset
  GET|POST|DELETE /_emulator/faults   list / add {{"spec": "..."}} / clear
  GET  /_emulator/health
  POST /token                    OAuth2 token endpoint (JWT bearer grant)

{GRAMMAR_HELP}
"""


def build_parser() -> argparse.ArgumentParser:
    """The CLI flags; each one maps to an EmulatorConfig field."""
    p = argparse.ArgumentParser(
        prog="slurmapi-emulator",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_argument_group("server")
    g.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1); a non-loopback address needs --allow-remote",
    )
    g.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host: anyone who can reach it and holds a token runs scripts as you",
    )
    g.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host header is NAME:PORT (repeatable; loopback names always work)",
    )
    g.add_argument(
        "--control-token-file",
        metavar="FILE",
        help="write the random token of the /_emulator/ paths here, mode 0600 "
        "(default: <--write-credentials FILE>.control-token; without either the paths are unusable)",
    )
    g.add_argument(
        "--header-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="close a new connection whose first request head is not in within S seconds (default 30)",
    )
    g.add_argument(
        "--idle-timeout",
        type=float,
        default=75.0,
        metavar="S",
        help="close a kept-alive connection whose next request head is not in within S seconds (default 75)",
    )
    g.add_argument(
        "--body-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="answer 408 to a request whose body takes longer to arrive (default 60)",
    )
    g.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 = any free port)")
    g.add_argument(
        "--envelope",
        choices=("body", "structured"),
        default="body",
        help='answer shape: "body" = {"status", "body": "<JSON string>"} (default), '
        '"structured" = {"status", "structuredBody": {...}}',
    )
    g.add_argument(
        "--cluster",
        dest="clusters",
        action="append",
        default=[],
        metavar="ID",
        help="accepted cluster id (repeatable); others get 404 NOT_FOUND. Default: any",
    )
    g.add_argument(
        "--region",
        dest="regions",
        action="append",
        default=None,
        metavar="NAME",
        help="a location served (repeatable; replaces the default, Google Cloud's regions); others get 404 NOT_FOUND",
    )
    g.add_argument(
        "--reject-query-strings",
        action="store_true",
        help="refuse any path containing '?' with 400 INVALID_ARGUMENT (an envelope that does not pass query strings)",
    )
    g.add_argument("--deny-permission", action="store_true", help="answer every call 403 PERMISSION_DENIED")
    g.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    g.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    a = p.add_argument_group("auth")
    a.add_argument(
        "--token",
        dest="tokens",
        action="append",
        default=[],
        metavar="T",
        help="accepted static bearer token (repeatable)",
    )
    a.add_argument(
        "--token-file", metavar="F", help="file of accepted static tokens, one a line (re-read when it changes)"
    )
    a.add_argument(
        "--write-credentials",
        dest="credentials_file",
        metavar="FILE",
        help="write (or reuse the key of) a service-account key JSON whose token_uri is this emulator's /token",
    )
    a.add_argument(
        "--token-lifetime",
        type=int,
        default=3600,
        metavar="S",
        help="lifetime of issued access tokens in seconds (default 3600)",
    )
    a.add_argument("--project", default="demo-project", help="project_id written in the key file")
    s = p.add_argument_group("slurm model")
    s.add_argument("--partitions", default="debug,a3", help="comma list; the first is the default (default debug,a3)")
    s.add_argument("--cpus", type=int, default=2, help="CPUs of the node; caps RUNNING jobs (default 2)")
    s.add_argument("--gpus", type=int, default=8, help="GPUs of the node (default 8)")
    s.add_argument(
        "--min-job-age",
        type=float,
        default=300,
        metavar="S",
        help="seconds a finished job stays in the live queue (default 300)",
    )
    s.add_argument(
        "--history-delay",
        type=float,
        default=0,
        metavar="S",
        help="accounting lag: /slurmdb sees every change S seconds late (default 0)",
    )
    s.add_argument(
        "--no-history-comments",
        dest="history_comments",
        action="store_false",
        help="the history keeps no job comments (Slurm's default AccountingStoreFlags)",
    )
    s.add_argument(
        "--minute-seconds",
        type=float,
        default=60,
        metavar="S",
        help="real seconds per minute of time_limit (default 60)",
    )
    s.add_argument(
        "--kill-wait",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL on cancel/time limit (default 2)",
    )
    s.add_argument(
        "--latency",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds added to every answer, token endpoint included (default 0)",
    )
    s.add_argument("--workdir", help="where jobs without a usable cwd run (default: a new temp dir)")
    s.add_argument(
        "--fault",
        dest="faults",
        action="append",
        default=[],
        metavar="SPEC",
        help="arm a fault at start (repeatable); grammar below",
    )
    s.add_argument(
        "--slurm-release",
        metavar="R",
        default=DEFAULT_SLURM_RELEASE,
        help=f"the Slurm release to act as ({', '.join(known_releases())}): the API versions it serves "
        f"and the release in each answer's meta (default {DEFAULT_SLURM_RELEASE}: "
        f"{', '.join(versions_of(DEFAULT_SLURM_RELEASE))})",
    )
    s.add_argument(
        "--api-versions",
        metavar="LIST",
        help=f"serve these API versions instead of the release's: a comma list of {VERSION_RANGE}, or 'all' "
        "(the release in each answer's meta stays --slurm-release's)",
    )
    s.add_argument(
        "--meta-client-user",
        metavar="WHO",
        default="token",
        help="what meta.client.user says while jobs stay the token's user's: token (default), slurmrestd "
        "(as slurmrestd says: root), empty, or user:NAME",
    )
    gw = p.add_argument_group("gateway mode (forward to a real slurmrestd)")
    gw.add_argument("--slurmrestd", metavar="URL", help="e.g. http://127.0.0.1:6820")
    gw.add_argument("--slurm-token-file", metavar="F", help="file holding the Slurm JWT (read on every call)")
    gw.add_argument("--slurm-user", metavar="NAME", help="sent as X-SLURM-USER-NAME")
    return p


def config_from_args(args: argparse.Namespace) -> EmulatorConfig:
    """Map parsed flags to an EmulatorConfig."""
    return EmulatorConfig(
        host=args.host,
        port=args.port,
        envelope=args.envelope,
        tokens=args.tokens,
        token_file=args.token_file,
        token_lifetime=args.token_lifetime,
        credentials_file=args.credentials_file,
        project=args.project,
        clusters=args.clusters,
        regions=args.regions if args.regions is not None else list(DEFAULT_REGIONS),
        partitions=[x.strip() for x in args.partitions.split(",") if x.strip()],
        cpus=args.cpus,
        gpus=args.gpus,
        min_job_age=args.min_job_age,
        history_delay=args.history_delay,
        history_comments=args.history_comments,
        minute_seconds=args.minute_seconds,
        workdir=args.workdir,
        faults=args.faults,
        reject_query_strings=args.reject_query_strings,
        deny_permission=args.deny_permission,
        slurmrestd=args.slurmrestd,
        slurm_token_file=args.slurm_token_file,
        slurm_user=args.slurm_user,
        slurm_release=args.slurm_release,
        api_versions=args.api_versions.split(",") if args.api_versions is not None else None,
        meta_client_user=args.meta_client_user,
        kill_wait=args.kill_wait,
        latency=args.latency,
        allow_remote=args.allow_remote,
        allowed_hosts=args.allowed_hosts,
        control_token_file=args.control_token_file,
        header_timeout=args.header_timeout,
        idle_timeout=args.idle_timeout,
        body_timeout=args.body_timeout,
    )


async def _serve(config: EmulatorConfig) -> None:
    server = EmulatorServer(config, cleanup_workdir=False)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    log = logging.getLogger("slurmapi_emulator")
    if server.cluster is not None:
        log.info("jobs run in %s", server.cluster.workdir)
    if server.control_token_file is not None:
        log.info("control token for /_emulator/ written to %s", server.control_token_file)
    else:
        log.info("no --control-token-file or --write-credentials: the /_emulator/ control paths answer 401")
    if not is_loopback(config.host):
        log.warning(
            "listening on %s (--allow-remote): whoever reaches it with a token runs scripts as you", config.host
        )
    print(server.url, flush=True)
    try:
        await stop.wait()
    finally:
        log.info("stopping: killing job processes")
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the slurmapi-emulator console script."""
    args = build_parser().parse_args(argv)
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    try:
        for spec in args.faults:
            parse_fault(spec)
        config = config_from_args(args)
        config.validate()
    except (FaultSpecError, ValueError) as exc:
        print(f"slurmapi-emulator: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(config))
    except InsecureFileError as exc:
        print(f"slurmapi-emulator: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"slurmapi-emulator: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0
