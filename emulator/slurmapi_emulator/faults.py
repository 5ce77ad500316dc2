"""Injected failures of the envelope, to test that a client never loses nor duplicates a job.

Grammar: ``KIND[@MATCH][*COUNT]``. KIND says what goes wrong and whether the Slurm action is still
performed (``-after``: done, then the error; ``-before``: not done); MATCH restricts the fault to
one kind of call; COUNT is how many matching calls it hits before it is spent (``*inf``: never).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MATCHES = ("submit", "job-get", "job-delete", "jobs", "jobs-state", "partitions", "slurmdb", "any")
SIMPLE_KINDS = (
    "unavailable",
    "429",
    "500-before",
    "502-before",
    "503-before",
    "500-after",
    "502-after",
    "503-after",
    "reset-before",
    "reset-after",
    "malformed-envelope",
    "non-json-body",
    "expire-token",
)
_SPEC_RE = re.compile(r"^(?P<kind>[a-z0-9-]+(?:=[0-9.]+)?)(?:@(?P<match>[a-z-]+))?(?:\*(?P<count>\d+|inf))?$")

GRAMMAR_HELP = """\
fault SPEC = KIND[@MATCH][*COUNT]   (COUNT default 1, "inf" = every matching call)
  MATCH: submit | job-get | job-delete | jobs | jobs-state | partitions | slurmdb | any (default)
  KIND (the Slurm action is NOT done unless marked "done"):
    unavailable          503 UNAVAILABLE envelope error
    429                  429 RESOURCE_EXHAUSTED envelope error
    500-before / 502-before / 503-before   HTTP error (502 is an HTML page, like Google's front end)
    500-after / 502-after / 503-after      done, then the HTTP error is answered
    reset-before / reset-after             TCP connection reset with no answer (after: done)
    slow=SECONDS         done, answer delayed by SECONDS
    late=SECONDS         done SECONDS after the call arrived, never answered: the connection is held
                         until then and reset (a client that timed out before has long given up)
    done-later=SECONDS   answered 503 UNAVAILABLE at once, yet carried out SECONDS later (a front end
                         that queued the call): the client believes nothing happened
    malformed-envelope   done, answered 200 with JSON that is not an envelope
    non-json-body        done, answered with envelope status 200 and a non-JSON body text
    expire-token         401 UNAUTHENTICATED; issued tokens are revoked (fetch a new one),
                         static tokens work again on the next call
  e.g. 500-after@submit   slow=2.5@jobs-state*3   late=3@submit   done-later=6@submit   unavailable*inf"""


class FaultSpecError(ValueError):
    """A fault SPEC that does not follow the grammar."""


@dataclass
class Fault:
    """One armed fault and how many more calls it will hit."""

    spec: str
    kind: str
    match: str
    remaining: float
    delay: float = 0.0

    @property
    def action_done(self) -> bool:
        """Whether the Slurm action is performed before the failure is answered."""
        return self.kind in (
            "500-after",
            "502-after",
            "503-after",
            "reset-after",
            "slow",
            "late",
            "malformed-envelope",
            "non-json-body",
        )

    def as_dict(self) -> dict[str, object]:
        remaining: object = "inf" if math.isinf(self.remaining) else int(self.remaining)
        return {"spec": self.spec, "kind": self.kind, "match": self.match, "remaining": remaining}


def parse_fault(spec: str) -> Fault:
    """Parse one SPEC; raises FaultSpecError with a readable message."""
    text = spec.strip()
    m = _SPEC_RE.match(text)
    if not m:
        raise FaultSpecError(f"bad fault spec {spec!r}\n{GRAMMAR_HELP}")
    kind = m.group("kind")
    delay = 0.0
    if kind.startswith("slow="):
        delay = float(kind.split("=", 1)[1])
        kind = "slow"
    elif kind.startswith("late="):
        delay = float(kind.split("=", 1)[1])
        kind = "late"
    elif kind.startswith("done-later="):
        delay = float(kind.split("=", 1)[1])
        kind = "done-later"
    elif kind not in SIMPLE_KINDS:
        raise FaultSpecError(f"unknown fault kind {kind!r} in {spec!r}\n{GRAMMAR_HELP}")
    match = m.group("match") or "any"
    if match not in MATCHES:
        raise FaultSpecError(f"unknown fault match {match!r} in {spec!r}; one of {', '.join(MATCHES)}")
    count_text = m.group("count") or "1"
    remaining = math.inf if count_text == "inf" else float(int(count_text))
    if remaining < 1:
        raise FaultSpecError(f"fault count must be >= 1 in {spec!r}")
    return Fault(text, kind, match, remaining, delay)


class FaultInjector:
    """The armed faults, in the order they were added; the first matching one hits a call."""

    def __init__(self) -> None:
        self.faults: list[Fault] = []

    def add(self, spec: str) -> Fault:
        fault = parse_fault(spec)
        self.faults.append(fault)
        return fault

    def clear(self) -> None:
        self.faults.clear()

    def take(self, call_kind: str) -> Fault | None:
        """The fault that hits a call of this kind, if any (its count is decremented)."""
        for fault in self.faults:
            if fault.match in ("any", call_kind):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    def as_list(self) -> list[dict[str, object]]:
        return [fault.as_dict() for fault in self.faults]
