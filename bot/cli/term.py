"""The CLI's consoles: rich consoles that never pass an escape sequence from untrusted text to the terminal.

Rich escapes its own markup but writes other characters as they are, so an op name holding ``ESC [2J``
would clear the user's screen and an OSC-8 sequence would plant a hidden link. :class:`SafeConsole` strips
escape sequences and control characters (:func:`bot.textsafe.strip_controls`) from every text segment it
renders; rich's own styling is added after that, when the segments are written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from bot.textsafe import strip_controls


class SafeConsole(Console):
    """A rich Console whose rendered text carries no escape sequences or control characters of its own."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for seg in super().render(renderable, options):
            if seg.control or not seg.text:
                yield seg
                continue
            text = strip_controls(seg.text)
            yield seg if text == seg.text else Segment(text, seg.style, seg.control)


def console(**kwargs: Any) -> SafeConsole:
    """A :class:`SafeConsole` (same arguments as ``rich.console.Console``)."""
    return SafeConsole(**kwargs)
