"""User-facing errors.

Every problem a person can fix (a missing file, a malformed profile, an unknown chip, a mesh that does
not multiply out) is raised as an :class:`AsapError` that names the file, field or value and says what
was expected. The CLI and the bots print these as one clear message instead of a traceback.
"""

from __future__ import annotations

import re
import reprlib


class AsapError(Exception):
    """A problem with the user's input or environment, stated so the user can fix it.

    ``source`` is the file (or other origin) the problem was found in, ``field`` the key or column,
    and ``hint`` an optional suggestion (e.g. the nearest known run IDs).
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.field = field
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        """The one-line (or two-line, with a hint) message shown to a person."""
        where = ""
        if self.source and self.field:
            where = f"{self.source}: {self.field}: "
        elif self.source:
            where = f"{self.source}: "
        elif self.field:
            where = f"{self.field}: "
        text = f"{where}{self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def public(self) -> str:
        """:meth:`render` for people who are not on the server (Slack, GitHub, the HTTP API).

        The same words, with server paths cut to their last two parts (``…/123/run.yaml``): a reply names the
        file, not the deployment's folders.
        """
        return hide_paths(self.render())

    def to_dict(self) -> dict[str, str | None]:
        """Structured form for JSON output and agent tools (errors as data)."""
        return {"error": self.message, "source": self.source, "field": self.field, "hint": self.hint}


class ConfigError(AsapError):
    """A sharding config that cannot be read, or whose mesh is invalid."""


class ProfileError(AsapError):
    """A profile file that cannot be read or does not have the expected structure."""


class RunNotFound(AsapError):
    """A run ID that matches no known run."""


class UnknownChip(AsapError):
    """A chip name that is not in the hardware catalog."""


class StoreUnavailable(AsapError):
    """A run store (object storage, MLflow) that is down or refuses access; other stores still answer."""


_ABS_PATH = re.compile(r"(?<![\w.:/~-])/(?:[^\s/'\"`:,;()]+/)+([^\s/'\"`:,;()]+/?[^\s/'\"`:,;()]*)")


def hide_paths(text: str) -> str:
    """Absolute POSIX paths in ``text`` cut to their last two parts: ``/srv/asap/runs/123/run.yaml`` -> ``…/123/run.yaml``."""
    def short(m: re.Match[str]) -> str:
        parts = m.group(0).rstrip("/").split("/")
        return "…/" + "/".join(parts[-2:]) if len(parts) > 3 else m.group(0)
    return _ABS_PATH.sub(short, text)


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxlist, _BRIEF.maxdict, _BRIEF.maxtuple, _BRIEF.maxset = 2, 4, 4, 4, 4
_BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlong = 60, 60, 40


def brief(value: object) -> str:
    """A bounded ``repr`` of an untrusted value for an error message (``'aaa...aaa'``, ``[1, 2, ...]``).

    ``!r`` of a value read from a file can be megabytes, or (a YAML alias bomb) expand without end; this
    looks at a few items per level and a few levels only.
    """
    text = _BRIEF.repr(value)
    return text if len(text) <= 120 else text[:57] + "..." + text[-57:]
