"""The one sanitiser for text that reaches a terminal (or a log a terminal will show).

Names come from outside: a bundle folder, a stage in genai_config.json, a testbed, an imported
record. A name holding ESC sequences could set the window title, clear the screen, ring the bell
or hide the lines above it. ``clean`` makes every such character visible and inert: C0 controls
(but tab and newline), DEL, C1 controls, Unicode's bidirectional overrides (which reorder what a
reader sees) and lone surrogates (which no encoder accepts) become ``\\uNNNN`` escapes (valid
in a JSON string too, so ``--format json`` on stdout stays JSON). The CLI's stdout and stderr
pass every write through it (support/stdio.py).
"""

from __future__ import annotations

import re

# C0 but \t \n; \r (it rewrites the line a reader sees); DEL; C1; bidi embeddings, overrides and
# isolates; lone surrogates
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    # \uXXXX, never \xNN: inside a JSON string on stdout (a name holding U+009B, which json.dumps
    # leaves raw) the escape must stay valid JSON, and read back as the same character
    return f"\\u{ord(m.group()):04x}"


def clean(text: str) -> str:
    """``text`` with every control, bidi override and lone surrogate shown as an escape."""
    return _UNSAFE.sub(_escape, text)


def clean_line(text: str) -> str:
    """``clean``, and newlines escaped too: a name that must stay on one line."""
    return clean(text).replace("\n", "\\n").replace("\t", "\\t")
