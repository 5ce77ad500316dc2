"""Reading single values out of untrusted JSON, and showing them in messages, without surprises.

Answers pass other users' records through this provider: any field can hold any JSON (a string
where a number belongs, ``1e400``, a list nested a thousand deep, lone surrogates). These helpers
never raise on such values and never recurse without bound, so the readers built on them can say
which field was wrong instead of failing with a bare ``TypeError`` or ``RecursionError``.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

# Slurm numbers are at most 64 bits (uint64 counters, int64 times); anything wider is not Slurm's.
_MAX_MAGNITUDE = 2**64
_MAX_DIGITS = 20


class _BoundedRepr(reprlib.Repr):
    """``reprlib`` with small limits, and no ``repr()`` of a huge int (Python refuses > 4300 digits)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxdict = self.maxlist = self.maxtuple = self.maxset = 6
        self.maxstring = 80
        self.maxother = 40
        self.maxlong = 40

    def repr_int(self, x: int, level: int) -> str:
        if abs(x) >= 10**self.maxlong:
            return f"<{x.bit_length()}-bit integer>"
        return repr(x)


_REPR = _BoundedRepr()


def preview(value: Any, limit: int = 160) -> str:
    """A short, one-line ``repr`` of any value, for error messages and logs."""
    try:
        text = _REPR.repr(value)
    except Exception:  # a Mapping whose methods misbehave: still say something
        text = f"<{type(value).__name__}>"
    text = clean_text(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clean_text(text: str) -> str:
    """The text with lone surrogates (valid in JSON, not in UTF-8) replaced, so a log can write it."""
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


def as_int(value: Any) -> int | None:
    """An integer from an int, an integral finite float or a string of ASCII digits; else ``None``.

    Booleans, ``inf``/``nan``, fractions and numbers wider than 64 bits are refused, so that no
    caller ever meets ``OverflowError`` or Python's limit on converting long digit strings.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        number = int(value)
    elif isinstance(value, str):
        digits = value.strip()
        body = digits[1:] if digits.startswith("-") else digits
        if not (body.isascii() and body.isdigit()) or len(body) > _MAX_DIGITS:
            return None
        number = int(digits)
    else:
        return None
    return number if -_MAX_MAGNITUDE < number < _MAX_MAGNITUDE else None


# What Slurm prints where a text field has no value.
_PLACEHOLDERS = frozenset({"None assigned", "(null)"})


class NotText(ValueError):
    """A value that is neither text nor a number Slurm printed as text (``read_text(strict=True)``)."""


def read_text(value: Any, *, strict: bool = False, limit: int | None = None, placeholders: bool = True) -> str | None:
    """The one reader of text, for Slurm's answers and for what users write.

    Returns the text trimmed, with lone surrogates replaced, cut to ``limit`` characters; ``None`` for
    no text: ``None``, blanks, and (with ``placeholders``) Slurm's ``(null)`` and ``None assigned``.
    Other shapes: ``None``, or with ``strict`` a number Slurm printed as text becomes its text and
    anything else (a bool, a list, an object) raises :class:`NotText`, so a reader can name the field.
    """
    if isinstance(value, str):
        text = clean_text(value).strip()
    elif not strict or value is None:
        return None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        text = preview(value)
    else:
        raise NotText(preview(value))
    if not text or (placeholders and text in _PLACEHOLDERS):
        return None
    if limit is not None and len(text) > limit:
        text = text[: limit - 3] + "..."
    return text
