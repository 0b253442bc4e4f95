"""Untrusted text made safe for a terminal: escape sequences and control characters removed.

Op names come from profiles, run names and descriptions from run.yaml, answers from a language model: any
of them can carry terminal escape sequences that recolour or clear the screen, retitle the window, hide
text or plant a clickable link (OSC 8) that points somewhere other than it reads. :func:`strip_controls`
removes ANSI CSI sequences, OSC strings (titles, OSC-8 hyperlinks), DCS/PM/APC/SOS strings, other ESC
sequences, the remaining C0 and C1 control characters (newline and tab are kept) and Unicode bidi overrides
(which reorder what a reader sees). The CLI's consoles apply it to everything they print
(:class:`bot.cli.term.SafeConsole`).
"""

from __future__ import annotations

import re

_CONTROLS = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL | ST: window titles, OSC-8 hyperlinks
    r"|\x1b[P^_X][^\x1b]*(?:\x1b\\)?"  # DCS / PM / APC / SOS strings
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI: colours, cursor moves, clear screen
    r"|\x1b[ -/]*[0-~]?"  # any other ESC sequence
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
    r"|\x9d[^\x07\x9c]*(?:\x07|\x9c)?"  # 8-bit OSC
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # other C0 controls (not \t \n), DEL, C1 controls
    r"|[\u202a-\u202e\u2066-\u2069]"  # bidi embeddings, overrides and isolates
)


def strip_controls(text: str) -> str:
    """``text`` without terminal escape sequences or control characters (newlines and tabs kept)."""
    return _CONTROLS.sub("", text) if text else text
