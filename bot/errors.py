"""User-facing errors.

Every problem a person can fix (a missing file, a malformed profile, an unknown chip, a mesh that does
not multiply out) is raised as an :class:`AsapError` that names the file, field or value and says what
was expected. The CLI and the bots print these as one clear message instead of a traceback.
"""

from __future__ import annotations


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
