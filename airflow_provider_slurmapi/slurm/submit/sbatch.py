"""The ``#SBATCH`` lines of a batch script, read as ``sbatch`` reads them, as Slurm job description fields.

The Slurm REST API ignores ``#SBATCH`` lines: a script that runs right with ``sbatch`` would run with
the wrong partition, time limit and GPUs, silently. This module reads them the way ``sbatch`` 24.11
does (the comment block right after ``#!``, several options a line, short and long forms, long
options abbreviated to a unique prefix, a later option winning over an earlier one) and turns them
into the ``job/submit`` fields ``sbatch`` itself would send. Values Slurm parses itself (``--begin``,
``--dependency``, ``%j`` patterns in paths) are passed on verbatim, so Slurm reads them as ``sbatch``
would. An option the API cannot express, or a malformed line, raises :class:`ConfigurationError`
naming the line and the fix, before anything is sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_slurmapi.slurm.api.api_versions import NEGOTIATE, traits
from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError
from airflow_provider_slurmapi.slurm.api.values import read_text
from airflow_provider_slurmapi.slurm.submit.slurm_time import SlurmTimeError, time_limit_field
from airflow_provider_slurmapi.slurm.submit.spec import add_environment

MAGIC = "#SBATCH"

_FIX = (
    "Fix the line, set the field in job={...} instead, or pass sbatch_directives=False to leave #SBATCH lines "
    "as comments."
)


@dataclass(frozen=True, slots=True)
class Directive:
    """One option of one ``#SBATCH`` line: the canonical long option name and its value."""

    line_number: int
    line: str
    option: str
    value: str | None

    def where(self) -> str:
        return _where(self.line_number, self.line)

    def describe(self) -> str:
        """The option as sbatch reads it, with the line it comes from (never an --export value)."""
        value = "" if self.value is None else f"={_names_only(self.value) if self.option == 'export' else self.value}"
        return f"--{self.option}{value} (script line {self.line_number})"


# -- showing lines without --export values ----------------------------------------------------------------
def _is_export_word(word: str) -> bool:
    """``--export``/``--export-file`` in any spelling getopt could take for it (``--e``, ``--ex=...``)."""
    if not word.startswith("--"):
        return False
    name = word[2:].partition("=")[0]
    return "export".startswith(name) or name.startswith("export")


def _names_only(value: str) -> str:
    """An ``--export`` value as ``NAME=***`` items: the names it assigns, never a value or a part of one.

    A bare name (``ALL``, ``HOME``) is shown only before any ``NAME=value``: after an unquoted comma it
    may be the rest of a value.
    """
    try:
        items = export_items(value)
    except ValueError:
        return "<not shown: an unbalanced quote>"
    shown = []
    assigned = False
    for item in items:
        name, equals, _ = item.partition("=")
        if equals and _ENV_NAME_RE.match(name):
            shown.append(f"{name}=***")
            assigned = True
        elif not equals and not assigned and _ENV_NAME_RE.match(item):
            shown.append(item)
        else:
            shown.append("<not shown>")
    return ",".join(shown)


def _shown(line: str) -> str:
    """A line as errors and notes show it: as written, unless it has an ``--export`` option in any spelling;
    then rebuilt from its words with the export values reduced to their names."""
    text = line.strip()
    try:
        words = _split(text[len(MAGIC) :])
    except ValueError:
        cut = text.find("--e")
        return text if cut < 0 else f"{text[:cut]}--e... (the rest is not shown: it may hold --export values)"
    if not any("--e" in word for word in words):
        return text
    shown: list[str] = [MAGIC]
    after_export = value_next = False
    for word in words:
        if value_next:
            shown.append(_names_only(word))
            value_next = False
        elif _is_export_word(word):
            option, equals, value = word.partition("=")
            shown.append(f"{option}={_names_only(value)}" if equals else option)
            after_export, value_next = True, not equals
        elif "--e" in word:  # an export spelling inside a quoted word: sbatch refuses it, nothing is shown
            shown.append("<not shown>")
            after_export = True
        elif after_export:
            # An unquoted space may have cut a value: after --export only option names are shown.
            shown.append(
                word.partition("=")[0] if word.startswith("--") else word[:2] if word.startswith("-") else "<not shown>"
            )
        else:
            shown.append(word if word and not any(c.isspace() or c in "'\"#" for c in word) else repr(word))
    return " ".join(shown)


def _where(number: int, line: str) -> str:
    return f"{_shown(line)} (script line {number})"


@dataclass(slots=True)
class DirectiveFields:
    """The job fields the directives ask for, and the directive lines each field comes from."""

    fields: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, list[Directive]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Variables sbatch itself puts in the job's environment (whatever --export says).
    environment: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class AppliedDirectives:
    """A job description with the script's directives applied, and what the log should say about it."""

    job: dict[str, Any]
    applied: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -- finding the lines ------------------------------------------------------------------------------------
def directive_lines(script: str) -> list[tuple[int, str]]:
    """``(line number, text)`` of the ``#SBATCH`` lines sbatch reads: the comment block after ``#!``.

    Blank lines and other comments may sit between them; the first command ends the block, and an
    ``#SBATCH`` line after it is an ordinary comment (as with sbatch).
    """
    lines = script.split("\n")
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1  # what prepare_submission's lstrip() skips before the #! line
    found = []
    for number, line in enumerate(lines[start + 1 :], start=start + 2):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        if line.startswith(MAGIC):
            found.append((number, line.rstrip("\r")))
    return found


def _words(number: int, line: str) -> list[str]:
    try:
        return _split(line[len(MAGIC) :])  # sbatch also reads "#SBATCH--time=5" (measured on 24.11)
    except ValueError as exc:
        raise ConfigurationError(f"{_where(number, line)}: unbalanced {exc} quote. {_FIX}") from None


def _split(text: str) -> list[str]:
    """Split the text after ``#SBATCH`` as sbatch does: quotes, backslashes, ``#`` starting a comment.

    Raises ``ValueError(quote)`` on an unbalanced quote.
    """
    words: list[str] = []
    current: list[str] | None = None
    quote: str | None = None
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == quote:
                quote = None
            elif char == "\\" and quote == '"' and index + 1 < len(text):
                index += 1
                current.append(text[index])  # type: ignore[union-attr]
            else:
                current.append(char)  # type: ignore[union-attr]
        elif char.isspace():
            if current is not None:
                words.append("".join(current))
                current = None
        elif char == "#" and current is None:
            break  # the rest of the line is a comment
        else:
            if current is None:
                current = []
            if char in "'\"":
                quote = char
            elif char == "\\" and index + 1 < len(text):
                index += 1
                current.append(text[index])
            else:
                current.append(char)
        index += 1
    if quote:
        raise ValueError(quote)
    if current is not None:
        words.append("".join(current))
    return words


# -- the options ------------------------------------------------------------------------------------------
# long name -> (short letter, takes an argument: "yes", "no" or "optional")
_SUPPORTED: dict[str, tuple[str | None, str]] = {
    "job-name": ("J", "yes"),
    "partition": ("p", "yes"),
    "time": ("t", "yes"),
    "time-min": (None, "yes"),
    "nodes": ("N", "yes"),
    "ntasks": ("n", "yes"),
    "ntasks-per-node": (None, "yes"),
    "cpus-per-task": ("c", "yes"),
    "mincpus": (None, "yes"),
    "mem": (None, "yes"),
    "mem-per-cpu": (None, "yes"),
    "mem-per-gpu": (None, "yes"),
    "gres": (None, "yes"),
    "gpus": ("G", "yes"),
    "gpus-per-node": (None, "yes"),
    "gpus-per-task": (None, "yes"),
    "cpus-per-gpu": (None, "yes"),
    "output": ("o", "yes"),
    "error": ("e", "yes"),
    "input": ("i", "yes"),
    "chdir": ("D", "yes"),
    "account": ("A", "yes"),
    "qos": ("q", "yes"),
    "constraint": ("C", "yes"),
    "prefer": (None, "yes"),
    "exclusive": (None, "optional"),
    "oversubscribe": ("s", "no"),
    "array": ("a", "yes"),
    "dependency": ("d", "yes"),
    "requeue": (None, "no"),
    "no-requeue": (None, "no"),
    "signal": (None, "yes"),
    "export": (None, "yes"),
    "mail-type": (None, "yes"),
    "mail-user": (None, "yes"),
    "comment": (None, "yes"),
    "reservation": (None, "yes"),
    "begin": ("b", "yes"),
    "hold": ("H", "no"),
    "nice": (None, "optional"),
    "exclude": ("x", "yes"),
    "nodelist": ("w", "yes"),
    "tmp": (None, "yes"),
    "open-mode": (None, "yes"),
    "licenses": ("L", "yes"),
    "wckey": (None, "yes"),
    "contiguous": (None, "no"),
    "overcommit": ("O", "no"),
    "no-kill": ("k", "optional"),
    "kill-on-invalid-dep": (None, "yes"),
    "distribution": ("m", "yes"),
    "threads-per-core": (None, "yes"),
    "deadline": (None, "yes"),
    "spread-job": (None, "no"),
}

# sbatch options that only change what the sbatch command prints: no job field, nothing lost.
_SBATCH_ONLY = {"parsable": (None, "no"), "quiet": ("Q", "no"), "verbose": ("v", "no"), "ignore-pbs": (None, "no")}

# sbatch options the REST API cannot express (or that make no sense without the sbatch command).
_REFUSED: dict[str, tuple[str | None, str]] = {
    "wait": ("W", "the REST submit returns at once; the operator already waits for the job (wait_for_completion)"),
    "test-only": (None, "the REST API has no test-only submit"),
    "wrap": (None, "the script is the job; --wrap replaces it"),
    "export-file": (None, "the file would be read on the submitting host; give job['environment'] instead"),
    "get-user-env": (None, "slurmrestd does not load a login environment; give job['environment'] instead"),
    "uid": (None, "a job runs as the user of the API call"),
    "gid": (None, "a job runs as the user of the API call"),
    "clusters": ("M", "the operator's cluster_id chooses the cluster"),
    "cluster-constraint": (None, "federation is not supported"),
    "propagate": (None, "it reads the limits of the submitting shell, which a REST call does not have"),
    "batch": (None, "not supported by this provider; set job['batch_features']"),
    "help": ("h", "it only prints help"),
    "usage": (None, "it only prints help"),
    "version": ("V", "it only prints the version"),
    "acctg-freq": (None, "not supported by this provider; set job['account_gather_frequency']"),
    "bb": (None, "not supported by this provider; set job['burst_buffer']"),
    "bbf": (None, "the file would be read on the submitting host; set job['burst_buffer']"),
    "container": (None, "not supported by this provider; set job['container']"),
    "container-id": (None, "not supported by this provider; set job['container_id']"),
    "core-spec": ("S", "not supported by this provider; set job['core_specification']"),
    "cores-per-socket": (None, "Slurm's REST API (v0.0.41 and later) has no field for it"),
    "cpu-freq": (None, "not supported by this provider; set job['cpu_frequency']"),
    "delay-boot": (None, "not supported by this provider; set job['delay_boot']"),
    "extra": (None, "the provider uses the job's extra field for its output report; see report_output"),
    "extra-node-info": ("B", "not supported by this provider"),
    "gpu-bind": (None, "not supported by this provider; set job['tres_bind']"),
    "gpu-freq": (None, "not supported by this provider; set job['tres_freq']"),
    "gpus-per-socket": (None, "not supported by this provider; set job['tres_per_socket']"),
    "gres-flags": (None, "not supported by this provider"),
    "hint": (None, "Slurm's REST API has no field for it"),
    "mcs-label": (None, "not supported by this provider; set job['mcs_label']"),
    "mem-bind": (None, "not supported by this provider; set job['memory_binding']"),
    "network": (None, "not supported by this provider; set job['network']"),
    "nodefile": ("F", "the file would be read on the submitting host; use --nodelist"),
    "ntasks-per-core": (None, "not supported by this provider; set job['tasks_per_core']"),
    "ntasks-per-gpu": (None, "not supported by this provider; set job['ntasks_per_tres']"),
    "ntasks-per-socket": (None, "not supported by this provider; set job['tasks_per_socket']"),
    "power": (None, "Slurm's REST API has no field for it"),
    "priority": (None, "not supported by this provider; set job['priority']"),
    "profile": (None, "not supported by this provider; set job['profile']"),
    "reboot": (None, "not supported by this provider; set job['reboot']"),
    "resv-ports": (None, "not supported by this provider"),
    "segment": (None, "not supported by this provider; set job['segment_size']"),
    "sockets-per-node": (None, "not supported by this provider; set job['sockets_per_node']"),
    "stepmgr": (None, "not supported by this provider"),
    "switches": (None, "not supported by this provider; set job['required_switches']"),
    "thread-spec": (None, "not supported by this provider; set job['thread_specification']"),
    "tres-bind": (None, "not supported by this provider; set job['tres_bind']"),
    "tres-per-task": (None, "not supported by this provider; set job['tres_per_task']"),
    "use-min-nodes": (None, "not supported by this provider"),
    "wait-all-nodes": (None, "not supported by this provider; set job['wait_all_nodes']"),
    "x11": (None, "there is no display to forward from a REST call"),
    "oom-kill-step": (None, "not supported by this provider; set job['oom_kill_step']"),
}

_ALL_LONG = {**{k: v for k, v in _SUPPORTED.items()}, **_SBATCH_ONLY}
_SHORT = {short: name for name, (short, _) in _ALL_LONG.items() if short}
_REFUSED_SHORT = {short: name for name, (short, _) in _REFUSED.items() if short}


def read_directives(script: str) -> list[Directive]:
    """Every option of the script's ``#SBATCH`` lines, in order; raises on an unknown or malformed one."""
    found: list[Directive] = []
    for number, line in directive_lines(script):
        words = _words(number, line)
        if words and words[0] in {":", "hetjob", "packjob"}:
            raise ConfigurationError(
                f"{_where(number, line)}: heterogeneous jobs are not supported by the REST submit "
                "of this provider. Submit each component as its own task, with a dependency."
            )
        found.extend(_parse_words(number, line, words))
    return found


def _parse_words(number: int, line: str, words: list[str]) -> Iterator[Directive]:
    where = _where(number, line)
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word.startswith("--") and len(word) > 2:
            name, equals, value = word[2:].partition("=")
            long = _long_name(name, where)
            kind = _ALL_LONG[long][1]
            if kind == "no":
                if equals:
                    raise ConfigurationError(f"{where}: --{long} takes no value. {_FIX}")
                yield Directive(number, line, long, None)
            elif kind == "optional":
                yield Directive(number, line, long, value if equals else None)
            else:
                if not equals:
                    if index >= len(words):
                        raise ConfigurationError(f"{where}: --{long} needs a value, e.g. --{long}=VALUE. {_FIX}")
                    value = words[index]
                    index += 1
                yield Directive(number, line, long, value)
        elif word.startswith("-") and len(word) > 1:
            position = 1
            while position < len(word):
                letter = word[position]
                position += 1
                long = _short_name(letter, where)
                kind = _ALL_LONG[long][1]
                if kind == "no" or (kind == "optional" and position >= len(word)):
                    yield Directive(number, line, long, None)
                    continue
                value = word[position:]
                if not value and kind == "yes":
                    if index >= len(words):
                        raise ConfigurationError(f"{where}: -{letter} needs a value, e.g. -{letter} VALUE. {_FIX}")
                    value = words[index]
                    index += 1
                yield Directive(number, line, long, value)
                break
        else:
            # After an --export option the word may be the rest of a value: never shown then.
            shown = "a word" if any("--e" in w for w in words[:index]) else repr(word)
            raise ConfigurationError(
                f"{where}: {shown} is not an option (sbatch options start with - or --; a value with spaces "
                f"needs quotes). {_FIX}"
            )


_NOT_TRANSLATED = "not supported by this provider"
_REMOVE = "Remove the line, or pass sbatch_directives=False to leave #SBATCH lines as comments."


def _refuse(where: str, name: str, reason: str) -> ConfigurationError:
    """Two refusals that never contradict each other: what the REST API cannot express, and what it can
    (in a job field) but this provider does not read from ``#SBATCH`` lines."""
    if reason.startswith(_NOT_TRANSLATED):
        field_hint = reason.removeprefix(_NOT_TRANSLATED).lstrip("; ")
        instead = f" The REST API can express it: {field_hint} instead, and remove the line." if field_hint else ""
        return ConfigurationError(
            f"{where}: --{name} is not read from #SBATCH lines by this provider.{instead} Or pass "
            "sbatch_directives=False to leave #SBATCH lines as comments."
        )
    return ConfigurationError(f"{where}: --{name} cannot be sent through the Slurm REST API: {reason}. {_REMOVE}")


def _long_name(name: str, where: str) -> str:
    if name in _ALL_LONG:
        return name
    if name in _REFUSED:
        raise _refuse(where, name, _REFUSED[name][1])
    # getopt_long, as sbatch uses it, takes any unique prefix of a long option.
    matches = sorted(n for n in (*_ALL_LONG, *_REFUSED) if n.startswith(name)) if name else []
    if len(matches) == 1:
        return _long_name(matches[0], where)
    if len(matches) > 1:
        raise ConfigurationError(
            f"{where}: --{name} is ambiguous (it could be --{', --'.join(matches)}); write the option in full. {_FIX}"
        )
    raise ConfigurationError(f"{where}: unknown option --{name}. {_FIX}")


def _short_name(letter: str, where: str) -> str:
    if letter in _SHORT:
        return _SHORT[letter]
    if letter in _REFUSED_SHORT:
        name = _REFUSED_SHORT[letter]
        raise _refuse(where, name, _REFUSED[name][1])
    raise ConfigurationError(f"{where}: unknown option -{letter}. {_FIX}")


# -- values -----------------------------------------------------------------------------------------------
def _bad(directive: Directive, what: str) -> ConfigurationError:
    return ConfigurationError(f"{directive.where()}: {what}. {_FIX}")


def _time(directive: Directive) -> dict[str, Any]:
    """``--time``/``--time-min``: Slurm's reader, shared with ``job["time_limit"]``; 0 is no limit, as in sbatch."""
    try:
        return time_limit_field(directive.value or "")
    except SlurmTimeError as exc:
        raise _bad(directive, f"{directive.value!r} is not a Slurm time: {exc}") from None


_SIZE_RE = re.compile(r"^(\d+)([KMGT]?)$", re.IGNORECASE)
_SIZE_FACTOR = {"": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


def megabytes(text: str) -> int:
    """Megabytes of a Slurm size (``500``, ``500M``, ``16G``, ``1T``, ``512K`` rounded up); raises ValueError."""
    match = _SIZE_RE.match(text.strip())
    if not match:
        raise ValueError(text)
    number, unit = int(match[1]), match[2].upper()
    if unit == "K":
        return (number + 1023) // 1024
    return number * _SIZE_FACTOR[unit]


def _size(directive: Directive) -> int:
    try:
        return megabytes(directive.value or "")
    except ValueError:
        raise _bad(
            directive, f"{directive.value!r} is not a size (a number of megabytes, or with K, M, G or T: '16G')"
        ) from None


def _count(directive: Directive, *, minimum: int = 1) -> int:
    value = (directive.value or "").strip()
    if not value.isdigit() or int(value) < minimum:
        raise _bad(directive, f"{directive.value!r} is not a whole number of at least {minimum}")
    return int(value)


def _value(directive: Directive) -> str:
    """The value an option needs, as written (a path keeps its blanks); refused when empty or with a NUL."""
    value = directive.value or ""
    if read_text(value, placeholders=False) is None:
        raise _bad(directive, "the value is empty")
    if "\0" in value:
        raise _bad(directive, "the value holds a NUL character")
    return value


_NODES_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
_NODES_LIST_RE = re.compile(r"^\d+(?:-\d+)?(?::\d+)?$|^\d+(?:,\d+)+$")


def _nodes(directive: Directive) -> dict[str, Any]:
    value = (directive.value or "").strip()
    match = _NODES_RE.match(value)
    if match:
        low = int(match[1])
        high = int(match[2]) if match[2] is not None else low
        if low < 1 or high < low:
            raise _bad(directive, f"{value!r}: the node count must be at least 1, and a range min-max with min <= max")
        return {"minimum_nodes": low, "maximum_nodes": high}
    if _NODES_LIST_RE.match(value):
        return {"nodes": value}  # a step (1-15:4) or a list of sizes (2,4,8): slurmctld reads it as sbatch's
    raise _bad(directive, f"{value!r} is not a node count (N, MIN-MAX, MIN-MAX:STEP or a list N,M,...)")


_MAIL_TYPES = {
    "BEGIN": ["BEGIN"],
    "END": ["END"],
    "FAIL": ["FAIL"],
    "REQUEUE": ["REQUEUE"],
    "STAGE_OUT": ["STAGE_OUT"],
    "INVALID_DEPEND": ["INVALID_DEPENDENCY"],
    "TIME_LIMIT": ["TIME=100%"],
    "TIME_LIMIT_90": ["TIME=90%"],
    "TIME_LIMIT_80": ["TIME=80%"],
    "TIME_LIMIT_50": ["TIME=50%"],
    "ARRAY_TASKS": ["ARRAY_TASKS"],
    "ALL": ["BEGIN", "END", "FAIL", "REQUEUE", "STAGE_OUT", "INVALID_DEPENDENCY"],
    "NONE": [],
}
_MAIL_ORDER = [
    "BEGIN",
    "END",
    "FAIL",
    "REQUEUE",
    "TIME=100%",
    "TIME=90%",
    "TIME=80%",
    "TIME=50%",
    "STAGE_OUT",
    "ARRAY_TASKS",
    "INVALID_DEPENDENCY",
]


def _mail_type(directive: Directive) -> list[str]:
    chosen: set[str] = set()
    for item in _value(directive).upper().split(","):
        if item.strip() not in _MAIL_TYPES:
            raise _bad(directive, f"{item!r} is not a mail type (one of {', '.join(_MAIL_TYPES)})")
        chosen.update(_MAIL_TYPES[item.strip()])
    return [name for name in _MAIL_ORDER if name in chosen]


_SIGNALS = {
    "HUP": 1,
    "INT": 2,
    "QUIT": 3,
    "ABRT": 6,
    "KILL": 9,
    "USR1": 10,
    "SEGV": 11,
    "USR2": 12,
    "PIPE": 13,
    "ALRM": 14,
    "TERM": 15,
    "CONT": 18,
    "STOP": 19,
    "TSTP": 20,
    "TTIN": 21,
    "TTOU": 22,
    "URG": 23,
    "XCPU": 24,
    "XFSZ": 25,
    "VTALRM": 26,
    "PROF": 27,
    "WINCH": 28,
}
_SIGNAL_RE = re.compile(r"^(?:(?P<flags>[RB]{1,2}):)?(?P<sig>[A-Za-z0-9]+)(?:@(?P<delay>\d+))?$", re.IGNORECASE)


def _signal(directive: Directive) -> dict[str, Any]:
    value = _value(directive).strip()
    match = _SIGNAL_RE.match(value)
    fix = "give [{R|B}:]SIGNAL[@SECONDS], e.g. B:USR1@90"
    if not match:
        raise _bad(directive, f"{value!r} is not a signal request ({fix})")
    sig = match["sig"].upper().removeprefix("SIG")
    if sig.isdigit():
        if not 1 <= int(sig) <= 64:
            raise _bad(directive, f"{match['sig']!r} is not a signal number ({fix})")
    elif sig not in _SIGNALS:
        raise _bad(directive, f"{match['sig']!r} is not a signal name ({fix})")
    delay = int(match["delay"]) if match["delay"] is not None else 60
    if delay > 0xFFFF:
        raise _bad(directive, f"@{delay}: the delay is at most 65535 seconds ({fix})")
    flags = (match["flags"] or "").upper()
    fields: dict[str, Any] = {
        "kill_warning_signal": sig,
        "kill_warning_delay": {"set": True, "infinite": False, "number": delay},
    }
    names = [name for letter, name in (("B", "BATCH_JOB"), ("R", "RESERVATION_JOB")) if letter in flags]
    if names:
        fields["kill_warning_flags"] = names
    return fields


_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EXPORT_KEYWORDS = ("ALL", "NONE", "NIL")


def export_items(value: str) -> list[str]:
    """The comma-separated items of an ``--export`` value, split as Slurm's ``find_quote_token`` does.

    A comma inside single or double quotes does not split; an item wholly in quotes loses them.
    Raises ``ValueError`` on an unbalanced quote (Slurm: "Improperly formed environment variable").
    """
    items: list[str] = []
    start = 0
    single = double = False
    for index, char in enumerate(value + ","):
        if char == "'":
            single = not single
        elif char == '"':
            double = not double
        elif char == "," and not single and not double:
            item = value[start:index]
            if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
                item = item[1:-1]
            if item:
                items.append(item)
            start = index + 1
    if single or double:
        raise ValueError("unbalanced quote")
    return items


def _export(directive: Directive, default_environment: tuple[str, ...]) -> dict[str, Any]:
    """``--export``: errors name the variables, never a value (environments hold secrets)."""
    try:
        items = export_items(_value(directive))
    except ValueError:
        raise _bad(directive, "the value has an unbalanced quote (the value is not shown)") from None
    base = list(default_environment)
    assignments: list[str] = []
    for index, item in enumerate(items):
        upper = item.upper()
        if index == 0 and upper in _EXPORT_KEYWORDS:
            if upper != "ALL":
                base = []
            continue
        name, equals, _ = item.partition("=")
        if not equals:
            # Named only before any NAME=value: after an unquoted comma it may be the rest of a value.
            shown = repr(item[:60]) if not assignments and _ENV_NAME_RE.match(item) else f"item {index + 1}"
            raise _bad(
                directive,
                f"{shown} would copy a variable of the submitting shell, which a REST call does not have; write "
                "NAME=VALUE (and quote a value that holds a comma)",
            )
        if not _ENV_NAME_RE.match(name):
            raise _bad(directive, f"item {index + 1} is not a variable name followed by = (the item is not shown)")
        assignments.append(item)
    names = {entry.partition("=")[0] for entry in assignments}
    environment = [entry for entry in base if entry.partition("=")[0] not in names] + assignments
    if not environment:
        environment = list(default_environment)
    return {"environment": environment}


_OPEN_MODES = {"A": "APPEND", "APPEND": "APPEND", "T": "TRUNCATE", "TRUNCATE": "TRUNCATE"}
_EXCLUSIVE = {"": "none", "USER": "user", "MCS": "mcs", "TOPO": "topo"}


def _exclusive(directive: Directive, api_version: str | None) -> dict[str, Any]:
    value = (directive.value or "").strip().upper()
    if value not in _EXCLUSIVE:
        raise _bad(directive, f"{directive.value!r}: --exclusive takes no value, or user, mcs or topo")
    if value == "TOPO" and api_version not in (None, NEGOTIATE) and not traits(api_version).has_exclusive_topo:
        raise _bad(directive, "--exclusive=topo needs api_version v0.0.41 or later")
    return {"shared": [_EXCLUSIVE[value]]}


def _gpu_tres(directive: Directive) -> str:
    """``gres/gpu:VALUE`` for each comma item of ``[type:]count`` (how sbatch fills the tres_per_* fields)."""
    value = _value(directive).strip()
    for item in value.split(","):
        count = item.rsplit(":", 1)[-1]
        if not count.isdigit() or not item.strip():
            raise _bad(directive, f"{item!r} is not a GPU request ([type:]count, e.g. 8 or a100:8)")
    return ",".join(f"gres/gpu:{item}" for item in value.split(","))


def _gres(directive: Directive) -> str:
    value = _value(directive).strip()
    if value.lower() == "none":
        return ""
    items = []
    for item in value.split(","):
        if not re.match(r"^[A-Za-z0-9_./-]+(?::[A-Za-z0-9_.-]+)*$", item):
            raise _bad(directive, f"{item!r} is not a generic resource (name[:type][:count], e.g. gpu:8)")
        items.append(item if item.startswith("gres/") else f"gres/{item}")
    return ",".join(items)


_BEGIN_RE = re.compile(
    r"^(now(\+\d+(seconds?|minutes?|hours?|days?|weeks?)?)?"
    r"|today|tomorrow|midnight|noon|elevenses|fika|teatime"
    r"|\d{1,2}:\d{2}(:\d{2})?(am|pm)?"
    r"|\d{4}-\d{2}-\d{2}(T\d{1,2}:\d{2}(:\d{2})?)?"
    r"|\d{1,2}[/.]\d{1,2}([/.]\d{2})?(-\d{1,2}:\d{2}(:\d{2})?)?"
    r"|\d{4}(\d{2})?)$",
    re.IGNORECASE,
)


def _begin(directive: Directive) -> str:
    """``--begin``/``--deadline``: passed on for slurmrestd to read with ``parse_time``, as sbatch reads them."""
    value = _value(directive).strip()
    if not _BEGIN_RE.match(value):
        raise _bad(
            directive,
            f"{value!r} is not a time sbatch reads (e.g. 2027-01-31T16:00:00, now+1hour, 16:00, tomorrow)",
        )
    return value  # slurmctld reads it with its own clock and time zone, exactly as for sbatch


# verify_dist_type (src/common/proc_args.c): plane=N, or up to three levels of block/cyclic/fcyclic/*,
# or arbitrary/hostfile, each with an optional ,pack or ,nopack; or pack/nopack alone.
_LEVEL = r"(?:block|cyclic|fcyclic|\*)"
_DISTRIBUTION_RE = re.compile(
    rf"^(?:plane=[0-9]+|(?:(?:arbitrary|hostfile|{_LEVEL}(?::{_LEVEL}){{0,2}})(?:,(?:pack|nopack))?)|pack|nopack)$",
    re.IGNORECASE,
)


def _distribution(directive: Directive) -> str:
    """``--distribution``: slurmrestd reads the text with sbatch's own ``verify_dist_type``, so it is passed on."""
    value = _value(directive).strip()
    if not _DISTRIBUTION_RE.match(value):
        raise _bad(
            directive,
            f"{value!r} is not a distribution sbatch reads (block, cyclic, plane=N, arbitrary, with up to three "
            "levels such as block:cyclic:fcyclic, and ,pack or ,nopack)",
        )
    if value.lower().startswith("plane=") and int(value[6:] or 0) == 0:
        raise _bad(directive, f"{value!r}: the plane size must be at least 1")
    if value.lower() in ("arbitrary", "hostfile") or value.lower().startswith(("arbitrary,", "hostfile,")):
        raise _bad(
            directive,
            "arbitrary is not read by this provider (sbatch derives the task count and SLURM_ARBITRARY_NODELIST "
            "from the node list or the submitting host's SLURM_HOSTFILE); give --nodelist and --ntasks instead",
        )
    return value


def _hostlist(directive: Directive) -> str:
    value = _value(directive).strip()
    if "/" in value:
        raise _bad(directive, f"{value!r} looks like a file: a REST call cannot read files; list the nodes")
    return value


def _path(directive: Directive) -> str:
    # %j, %A, %a, %x, %u... are expanded by Slurm itself, as for sbatch: passed on verbatim.
    return _value(directive)


def _nice(directive: Directive) -> int:
    if directive.value is None:
        return 100
    value = directive.value.strip()
    if not re.match(r"^[+-]?\d+$", value) or abs(int(value)) > 2147483645:
        raise _bad(directive, f"{value!r} is not a nice adjustment (an integer, e.g. 100)")
    return int(value)


def _boolean_01(directive: Directive, name: str) -> bool:
    value = (directive.value or "").strip().lower()
    if value in ("1", "yes", "true"):
        return True
    if value in ("0", "no", "false"):
        return False
    raise _bad(directive, f"{directive.value!r}: --{name} takes 0 or 1")


def _invalid_dependency_flag(directive: Directive) -> str:
    kill = _boolean_01(directive, "kill-on-invalid-dep")
    return "KILL_INVALID_DEPENDENCY" if kill else "NO_KILL_INVALID_DEPENDENCY"


def _no_kill(directive: Directive) -> bool:
    if directive.value not in (None, "", "off", "OFF"):
        raise _bad(directive, f"{directive.value!r}: --no-kill takes no value, or off")
    return directive.value is None or directive.value == ""


_Builder = Callable[[Directive], dict[str, Any]]


def _builders(api_version: str | None, default_environment: tuple[str, ...]) -> dict[str, _Builder]:
    def one(name: str, convert: Callable[[Directive], Any]) -> _Builder:
        return lambda d: {name: convert(d)}

    return {
        "job-name": one("name", _value),
        "partition": one("partition", _value),
        "time": one("time_limit", _time),
        "time-min": one("time_minimum", _time),
        "nodes": _nodes,
        "ntasks": one("tasks", _count),
        "ntasks-per-node": one("tasks_per_node", _count),
        "cpus-per-task": one("cpus_per_task", _count),
        "mincpus": one("minimum_cpus_per_node", _count),
        "mem": one("memory_per_node", lambda d: {"set": True, "infinite": False, "number": _size(d)}),
        "mem-per-cpu": one("memory_per_cpu", lambda d: {"set": True, "infinite": False, "number": _size(d)}),
        "mem-per-gpu": one("memory_per_tres", lambda d: f"gres/gpu:{_size(d)}"),
        "gpus": one("tres_per_job", _gpu_tres),
        "cpus-per-gpu": one("cpus_per_tres", lambda d: f"gres/gpu:{_count(d)}"),
        "output": one("standard_output", _path),
        "error": one("standard_error", _path),
        "input": one("standard_input", _path),
        "chdir": one("current_working_directory", _chdir),
        "account": one("account", _value),
        "qos": one("qos", _value),
        "constraint": one("constraints", _value),
        "prefer": one("prefer", _value),
        "exclusive": lambda d: _exclusive(d, api_version),
        "oversubscribe": lambda d: {"shared": ["oversubscribe"]},
        "array": one("array", _array),
        "dependency": one("dependency", _value),
        "requeue": lambda d: {"requeue": True},
        "no-requeue": lambda d: {"requeue": False},
        "signal": _signal,
        "export": lambda d: _export(d, default_environment),
        "mail-type": one("mail_type", _mail_type),
        "mail-user": one("mail_user", _value),
        "comment": one("comment", _value),
        "reservation": one("reservation", _value),
        "begin": one("begin_time", _begin),
        "hold": lambda d: {"hold": True},
        "nice": one("nice", _nice),
        "exclude": one("excluded_nodes", _hostlist),
        "nodelist": one("required_nodes", _hostlist),
        "tmp": one("temporary_disk_per_node", _size),
        "open-mode": one("open_mode", _open_mode),
        "licenses": one("licenses", _value),
        "wckey": one("wckey", _value),
        "contiguous": lambda d: {"contiguous": True},
        "overcommit": lambda d: {"overcommit": True},
        "no-kill": lambda d: {"kill_on_node_fail": not _no_kill(d)},
        "kill-on-invalid-dep": lambda d: {"flags": [_invalid_dependency_flag(d)]},
        "distribution": one("distribution", _distribution),
        "threads-per-core": one("threads_per_core", _count),
        "deadline": one("deadline", _begin),
        "spread-job": lambda d: {"flags": ["SPREAD_JOB"]},
    }


def _chdir(directive: Directive) -> str:
    value = _value(directive)
    if not value.startswith("/"):
        raise _bad(
            directive,
            f"{value!r} is relative: sbatch resolves it against the directory you submit from, which a REST "
            "call does not have; give an absolute path on the cluster",
        )
    return value


_ARRAY_RE = re.compile(r"^\d+(-\d+(:\d+)?)?(,\d+(-\d+(:\d+)?)?)*(%\d+)?$")


def _array(directive: Directive) -> str:
    value = _value(directive).strip()
    if not _ARRAY_RE.match(value):
        raise _bad(directive, f"{value!r} is not an array specification (e.g. 0-9, 1,3,5, 0-15:4 or 0-99%10)")
    return value


def _open_mode(directive: Directive) -> list[str]:
    value = _value(directive).strip().upper()
    if value not in _OPEN_MODES:
        raise _bad(directive, f"{directive.value!r} is not an open mode (append or truncate)")
    return [_OPEN_MODES[value]]


# Fields that several options fill together, and the job fields that override the whole group.
_GROUPS: dict[str, frozenset[str]] = {
    "minimum_nodes": frozenset({"minimum_nodes", "maximum_nodes", "nodes"}),
    "maximum_nodes": frozenset({"minimum_nodes", "maximum_nodes", "nodes"}),
    "nodes": frozenset({"minimum_nodes", "maximum_nodes", "nodes"}),
    "kill_warning_signal": frozenset({"kill_warning_signal", "kill_warning_delay", "kill_warning_flags"}),
    "kill_warning_delay": frozenset({"kill_warning_signal", "kill_warning_delay", "kill_warning_flags"}),
    "kill_warning_flags": frozenset({"kill_warning_signal", "kill_warning_delay", "kill_warning_flags"}),
    "shared": frozenset({"shared", "exclusive", "oversubscribe"}),
}


# Fields whose values may hold secrets: a note names them, never shows them.
_VALUE_NOT_SHOWN = frozenset({"environment"})


def directive_fields(
    script: str, *, api_version: str | None = None, default_environment: tuple[str, ...] = ()
) -> DirectiveFields:
    """The job fields the script's ``#SBATCH`` lines ask for, as sbatch would send them.

    A later option wins over an earlier one, as with sbatch; ``--gres`` and ``--gpus-per-node`` both
    fill ``tres_per_node``.
    """
    builders = _builders(api_version, default_environment)
    result = DirectiveFields()
    last: dict[str, Directive] = {}
    for directive in read_directives(script):
        if directive.option in _SBATCH_ONLY:
            result.notes.append(f"{directive.where()}: only changes what the sbatch command prints; ignored.")
            continue
        key = "requeue" if directive.option in ("requeue", "no-requeue") else directive.option
        key = "shared" if key in ("exclusive", "oversubscribe") else key
        last.pop(key, None)
        last[key] = directive
    tres_per_node: list[tuple[str, Directive]] = []
    tres_per_task: list[tuple[str, Directive]] = []
    for key, directive in last.items():
        if key == "gres":
            tres_per_node.insert(0, (_gres(directive), directive))
            continue
        if key == "gpus-per-node":
            tres_per_node.append((_gpu_tres(directive), directive))
            continue
        if key == "gpus-per-task":
            tres_per_task.append((_gpu_tres(directive), directive))
            continue
        for name, value in builders[directive.option](directive).items():
            if name == "flags" and name in result.fields:  # --spread-job and --kill-on-invalid-dep add up
                result.fields[name] = [*result.fields[name], *value]
                result.sources[name].append(directive)
                continue
            result.fields[name] = value
            result.sources[name] = [directive]
        if key == "cpus-per-task":  # sbatch 24.11 also sends the CPUs as a TRES of each task
            tres_per_task.insert(0, (f"cpu={result.fields['cpus_per_task']}", directive))
    if tres_per_node:
        result.fields["tres_per_node"] = ",".join(value for value, _ in tres_per_node if value)
        result.sources["tres_per_node"] = [directive for _, directive in tres_per_node]
    if tres_per_task:
        result.fields["tres_per_task"] = ",".join(value for value, _ in tres_per_task)
        result.sources["tres_per_task"] = [directive for _, directive in tres_per_task]
    if "threads-per-core" in last:
        _threads_per_core_extras(result, last)
    return result


def _threads_per_core_extras(result: DirectiveFields, last: Mapping[str, Directive]) -> None:
    """What sbatch does besides sending ``threads_per_core`` (``src/sbatch/opt.c``, measured on 24.11).

    It puts ``SLURM_THREADS_PER_CORE`` in the job's environment (srun in the job reads it), and with
    ``--nodes=N`` (one count) and no task count it asks for N x threads tasks.
    """
    directive = last["threads-per-core"]
    threads = result.fields["threads_per_core"]
    result.environment["SLURM_THREADS_PER_CORE"] = str(threads)
    result.sources.setdefault("SLURM_THREADS_PER_CORE", []).append(directive)
    low, high = result.fields.get("minimum_nodes"), result.fields.get("maximum_nodes")
    if low is not None and low == high and "ntasks" not in last and "ntasks-per-node" not in last:
        result.fields["tasks"] = max(low, 1) * threads
        result.sources["tasks"] = [last["nodes"], directive]


def apply_directives(
    job: Mapping[str, Any],
    script: str,
    *,
    api_version: str | None = None,
    default_environment: tuple[str, ...] = (),
) -> AppliedDirectives:
    """``job`` completed with the fields of the script's ``#SBATCH`` lines; a field set in ``job`` wins.

    ``applied`` names each field taken from a directive; ``notes`` says which directives ``job``
    overrode (and which were ignored), for the task log.
    """
    if not isinstance(script, str):
        return AppliedDirectives(job=dict(job))  # prepare_submission says what a script must be
    found = directive_fields(script, api_version=api_version, default_environment=default_environment)
    merged = dict(job)
    result = AppliedDirectives(job=merged, notes=list(found.notes))
    set_in_job = {name for name, value in job.items() if value is not None}
    if "cpus_per_task" in set_in_job and "tres_per_task" in found.fields:
        # The CPU count in tres_per_task follows --cpus-per-task, which job['cpus_per_task'] overrides.
        items = [item for item in found.fields["tres_per_task"].split(",") if not item.startswith("cpu=")]
        if items:
            found.fields["tres_per_task"] = ",".join(items)
        else:
            del found.fields["tres_per_task"]
    for name, value in found.fields.items():
        group = _GROUPS.get(name, frozenset({name}))
        overriding = sorted(group & set_in_job)
        lines = ", ".join(directive.describe() for directive in found.sources[name])
        if overriding:
            kept = ", ".join(
                f"job[{key!r}]" if key in _VALUE_NOT_SHOWN else f"job[{key!r}]={job[key]!r}" for key in overriding
            )
            note = f"{kept} kept over #SBATCH {lines}."
            if note not in result.notes:
                result.notes.append(note)
            continue
        merged[name] = value
        result.applied.append(name)
    if found.environment and "threads_per_core" in result.applied:
        merged["environment"] = add_environment(merged, found.environment)["environment"]
        shown = ", ".join(f"{name}={value}" for name, value in found.environment.items())
        result.notes.append(f"{shown} added to the job's environment, as sbatch does for #SBATCH --threads-per-core.")
    return result
