"""Slurm's time forms (``--time``, ``--time-min``, ``job["time_limit"]``), read exactly as ``sbatch`` reads them.

One reader for every path, so that a script's ``#SBATCH --time=0-5:30`` and a DAG's
``job={"time_limit": "0-5:30"}`` can never mean two different limits. It follows Slurm's
``time_str2mins`` (``src/common/parse_time.c``, unchanged from 24.11 to 26.05) step by step:

* ``-1``, ``INFINITE``, ``UNLIMITED`` (any case, nothing around them) mean no limit;
* the text holds only digits, ``-`` and ``:``, with at most one ``-`` (before any ``:``) and two
  ``:``, and enough numbers around them (``_is_valid_timespec``);
* with a ``-``: ``days-hours[:minutes[:seconds]]`` (``"5-"`` is 5 days, as in Slurm); without:
  ``hours:minutes:seconds`` with two ``:``, else ``minutes[:seconds]``;
* seconds round UP to whole minutes.

Two things Slurm's C code does not refuse are refused here, because ``sbatch`` then submits a
meaningless limit: a negative time (``"-5"``: ``sbatch`` sends an unsigned wrap, shown ``INVALID``)
and a time whose seconds overflow Slurm's 32-bit ``int`` (over about 68 years).
"""

from __future__ import annotations

import re

FORMS = "minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds"
_INFINITE = frozenset({"-1", "INFINITE", "UNLIMITED"})
_INT_MAX = 2**31 - 1  # time_str2secs counts in a C int
_NUMBER = re.compile(r"[+-]?[0-9]+")


class SlurmTimeError(ValueError):
    """A text ``time_str2mins`` refuses (or reads as a meaningless limit); the message says why."""


def slurm_minutes(text: str) -> int | None:
    """Minutes of a Slurm time, as ``time_str2mins`` reads it; ``None`` means no limit.

    ``0`` is returned as ``0``: ``sbatch`` makes it "no limit" for ``--time`` and ``--time-min``,
    which :func:`time_limit_field` does.
    """
    if not isinstance(text, str) or not text:
        raise SlurmTimeError("it is empty")
    if text.upper() in _INFINITE:
        return None
    if not _valid_timespec(text):
        raise SlurmTimeError(f"it is not one of Slurm's time forms ({FORMS}, or UNLIMITED)")
    if "-" in text:
        days, hours, minutes, seconds = _scan(text, "-::")
    else:
        values = _scan(text, "::")
        if len(values) == 3:
            days, (hours, minutes, seconds) = 0, values
        else:
            days, hours, minutes, seconds = 0, 0, values[0], values[1] if len(values) > 1 else 0
    total = days * 86400 + hours * 3600 + minutes * 60 + seconds
    if total < 0:
        raise SlurmTimeError("it is negative (sbatch would send a meaningless limit; -1 alone means no limit)")
    if total + 59 > _INT_MAX:
        raise SlurmTimeError(f"it is too long: Slurm counts time in seconds up to {_INT_MAX} (about 68 years)")
    return (total + 59) // 60


def _valid_timespec(text: str) -> bool:
    """Slurm's ``_is_valid_timespec``: which characters, and how many numbers around ``-`` and ``:``."""
    numbers = dashes = colons = 0
    in_number = False
    for char in text:
        if "0" <= char <= "9":
            if not in_number:
                numbers += 1
                in_number = True
        elif char == "-":
            in_number = False
            dashes += 1
            if colons:
                return False
        elif char == ":":
            in_number = False
            colons += 1
        else:
            return False
    if not numbers or dashes > 1 or colons > 2:
        return False
    needed = {1: 3, 2: 4} if dashes else {1: 2, 2: 3}
    return numbers >= needed.get(colons, 0)


def _scan(text: str, separators: str) -> list[int]:
    """What ``sscanf(text, "%d<sep>%d<sep>...")`` fills, left to right, stopping at the first mismatch.

    Fields that are not filled count 0, as Slurm's variables start at 0; the list has one entry per
    ``%d`` of the format.
    """
    values: list[int] = []
    position = 0
    for index in range(len(separators) + 1):
        if index:
            if text[position : position + 1] != separators[index - 1]:
                break
            position += 1
        match = _NUMBER.match(text, position)
        if not match:
            break
        digits = match[0].lstrip("+-").lstrip("0")
        if len(digits) > 10:  # beyond any C int; also keeps int() far from Python's digit limit
            raise SlurmTimeError(f"it is too long: Slurm counts time in seconds up to {_INT_MAX} (about 68 years)")
        values.append(int(match[0]))
        position = match.end()
    if separators == "::" and len(values) != 3:
        return values  # minutes[:seconds]: the caller reads one or two values
    return values + [0] * (len(separators) + 1 - len(values))


def time_limit_field(text: str) -> dict[str, object]:
    """``--time``/``--time-min`` as the REST API's ``{"set", "infinite", "number"}``; 0 is no limit, as in sbatch."""
    minutes = slurm_minutes(text)
    if minutes is None or minutes == 0:
        return {"set": True, "infinite": True, "number": 0}
    return {"set": True, "infinite": False, "number": minutes}
