"""Terminal control sequences, and what a terminal would show of a text without them.

Shared by both sides of a job's ``Extra``: the node-side supervisor strips them from the output it
reports (``wrap_script`` inlines this file's text into the supervisor's, which imports nothing of the
provider), and the provider strips them again from whatever a record's ``extra`` says (anyone may set
it). Runs on the node under any python3 >= 3.6: the standard library's ``re`` only, no PEP 604/585
annotations, no ``from __future__`` import.
"""

import re

CONTROL_SEQUENCES = re.compile(
    r"\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"  # OSC ... BEL/ST (unterminated: to the end of its line only)
    r"|\x1b[P^_X][^\x1b\n]*(?:\x1b\\)?"  # DCS, PM, APC, SOS ... ST (likewise)
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI (7- and 8-bit)
    r"|\x9d[^\x07\x1b\x9c\n]*(?:\x07|\x9c|\x1b\\)?"  # 8-bit OSC
    r"|\x1b[ -/]*[0-~]?"  # other escape sequences
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"  # other C0/C1 controls (not \t \n \r)
    # Unicode format controls a terminal does not show: the Arabic letter mark, Mongolian vowel separator,
    # zero-width and directional marks, line and paragraph separators, bidi embeddings, overrides and
    # isolates, invisible operators, the BOM (zero-width no-break space), interlinear annotations, tags.
    "|[\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def strip_controls(text: str) -> str:
    """What a terminal would show of ``text``, as plain lines: escape sequences and controls removed."""
    lines = []
    for line in CONTROL_SEQUENCES.sub("", text).split("\n"):
        line = line.rstrip("\r")
        lines.append(line.rsplit("\r", 1)[-1])  # a line rewritten with \r (progress bar): its last state
    return "\n".join(lines)
