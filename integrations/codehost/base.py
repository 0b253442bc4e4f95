"""The code-host interface: what opening an "apply proposal" change needs from GitHub or a local git repo.

Two adapters implement :class:`CodeHost`: :mod:`integrations.codehost.localgit` (the embedded default, a
git repository on disk: branch + commit, the branch *is* the change) and :mod:`integrations.codehost.github`
(PyGithub: git data API commits and pull requests). :mod:`bot.apply` is written only against this Protocol.

Paths are repository-relative POSIX paths; :func:`safe_repo_path` is the one gate every adapter puts a
path through, so text from a comment or a settings file can never name a file outside the repository.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from bot.errors import AsapError

BRANCH_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")


@dataclass(frozen=True)
class BotIdentity:
    """Name and e-mail the bot writes commits as; a branch head by anyone else is a person's push."""

    name: str = "asap-bot"
    email: str = "asap-bot@users.noreply.github.com"
    login: str | None = None  # the GitHub login the bot comments as (token user or "<app-slug>[bot]")


@dataclass(frozen=True)
class CommitInfo:
    """The head commit of a branch: who wrote it and on top of what."""

    sha: str
    parents: tuple[str, ...]
    author_email: str
    committer_email: str
    message: str = ""

    def written_by(self, bot: BotIdentity) -> bool:
        """True when both author and committer are the bot (a rebase or amend by a person changes one)."""
        return self.author_email.lower() == bot.email.lower() and self.committer_email.lower() == bot.email.lower()


@dataclass(frozen=True)
class PullRequest:
    """An open change request: a GitHub pull request, or a local ``asap/*`` branch."""

    number: int
    url: str
    head_branch: str
    base_branch: str
    title: str
    body: str = ""
    head_sha: str = ""


@dataclass
class CommitResult:
    sha: str
    changed: bool  # False: the branch already held exactly this change on the current base
    diff: str = ""
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class CodeHost(Protocol):
    """The operations :func:`bot.apply.apply_proposal` needs (see module docstring)."""

    @property
    def name(self) -> str:
        """Human-readable repository name, e.g. ``acme/llm`` or ``/home/me/llm``."""
        ...

    @property
    def bot(self) -> BotIdentity: ...

    def default_branch(self) -> str: ...

    def read_file(self, path: str, ref: str) -> str | None:
        """The UTF-8 text of ``path`` at branch or commit ``ref``; None when the file does not exist there."""
        ...

    def branch_head(self, branch: str) -> CommitInfo | None:
        """The head commit of ``branch``; None when the branch does not exist."""
        ...

    def commit_file(self, branch: str, base: str, path: str, text: str, message: str) -> CommitResult:
        """Point ``branch`` at ONE new commit on top of ``base``'s head that sets ``path`` to ``text``.

        The branch is created or force-moved (it is bot-owned; the caller checks :meth:`branch_head` first).
        When the branch already holds exactly this content on the current base, nothing is written.
        """
        ...

    def open_pulls(self) -> list[PullRequest]:
        """Open change requests whose head branch starts with ``asap/``."""
        ...

    def create_pull(self, branch: str, base: str, title: str, body: str) -> PullRequest: ...

    def update_pull(self, pull: PullRequest, title: str, body: str) -> PullRequest: ...


def safe_repo_path(path: str, *, field: str = "config_path") -> str:
    """Normalise a repository-relative path, refusing absolute paths, ``..``, ``.git`` and odd characters.

    Text from a PR comment or a settings file may name a config; it must never reach a file outside the
    repository tree (``../../etc/passwd``, ``/etc/passwd``, ``C:\\x``) or git's own metadata.
    """
    if not isinstance(path, str) or not path.strip():
        raise AsapError("expected a repository-relative file path", field=field)
    raw = path.strip()
    if len(raw) > 400 or not raw.isprintable() or "\\" in raw or "\x00" in raw:
        raise AsapError(f"{raw[:80]!r} is not a plain repository-relative path", field=field)
    if "://" in raw:
        raise AsapError(f"{raw!r} is a URL; expected a path inside the repository", field=field)
    if raw.startswith("/") or re.match(r"^[A-Za-z]:", raw) or raw.startswith("~"):
        raise AsapError(f"{raw!r} is an absolute path; expected a path inside the repository", field=field,
                        hint="name the config relative to the repository root, e.g. configs/train.yml")
    norm = posixpath.normpath(raw)
    parts = norm.split("/")
    if norm in (".", "") or ".." in raw.split("/") or parts[0] == "..":
        raise AsapError(f"{raw!r} points outside the repository", field=field,
                        hint="name the config relative to the repository root, e.g. configs/train.yml")
    if any(p == ".git" for p in parts):
        raise AsapError(f"{raw!r} is inside git's metadata, not a config file", field=field)
    return norm


def safe_branch(name: str) -> str:
    """A branch name ASAP may write: printable, no ``..``, no spaces, below ``asap/``."""
    if not BRANCH_RE.match(name) or ".." in name or name.endswith((".lock", "/")) or "//" in name:
        raise AsapError(f"{name!r} is not a branch name ASAP writes", field="branch")
    if not name.startswith("asap/"):
        raise AsapError(f"ASAP only writes branches under asap/, not {name!r}", field="branch")
    return name
