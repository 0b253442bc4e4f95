"""History from a local git repository: every commit that changed a sharding config file.

Uses the ``git`` command (no extra dependency). For each commit touching a ``*.yml``/``*.yaml`` file it
reads the file at the parent and at the commit, keeps changes of mesh keys (or remat / batch settings),
and reads the commit message for run IDs, stated metrics, OOM/invalid markers, chip and bottleneck.
Commits whose records are already known can be skipped, so an update only reads new commits.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from bot.errors import AsapError
from knowledge.history import HistoryRecord
from knowledge.history_sources.common import build_record, is_config_path

MAX_COMMITS = 20_000
_GITHUB_REMOTE = re.compile(r"github\.com[:/]([\w.-]+/[\w.-]+?)(?:\.git)?/?$")


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=check, encoding="utf-8",
            errors="replace",
        )
    except FileNotFoundError:
        raise AsapError("the git command is not installed", source=str(repo)) from None
    except subprocess.CalledProcessError as exc:
        raise AsapError(f"git {' '.join(args[:2])} failed: {exc.stderr.strip()[:300]}", source=str(repo)) from None


def _github_slug(repo: Path) -> str | None:
    remote = _git(repo, "remote", "get-url", "origin", check=False).stdout.strip()
    m = _GITHUB_REMOTE.search(remote)
    return m.group(1) if m else None


def _show(repo: Path, rev: str, path: str) -> str | None:
    out = _git(repo, "show", f"{rev}:{path}", check=False)
    return out.stdout if out.returncode == 0 else None


def git_history(repo: Path, *, skip_commits: set[str] | None = None, max_commits: int = MAX_COMMITS) -> Iterator[HistoryRecord]:
    """Records for commits (newest first) that changed a sharding config in ``repo``.

    ``skip_commits``: SHAs already imported; their files are not read again.
    Raises :class:`AsapError` when ``repo`` is not a git repository.
    """
    repo = Path(repo)
    if not repo.is_dir():
        raise AsapError("repository folder not found", source=str(repo))
    if _git(repo, "rev-parse", "--is-inside-work-tree", check=False).returncode != 0:
        raise AsapError("not a git repository", source=str(repo), hint="pass --repo with the folder of a git checkout")
    if _git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False).returncode != 0:
        return  # empty repository: no history yet
    log = _git(
        repo, "log", f"--max-count={max_commits}", "--no-merges", "--format=%x1e%H%x1f%P%x1f%aI%x1f%s%x1f%b%x1f",
        "--name-status", "--no-renames", "--", "*.yml", "*.yaml",
    ).stdout
    skip = skip_commits or set()
    slug = _github_slug(repo)
    for chunk in log.split("\x1e"):
        if not chunk.strip():
            continue
        fields = chunk.split("\x1f")
        if len(fields) < 6:
            continue
        sha, parents, date, subject, body, files = fields[0].strip(), fields[1].split(), fields[2], fields[3], fields[4], fields[5]
        if sha in skip:
            continue
        parent = parents[0] if parents else None
        for line in files.strip().splitlines():
            status, _, path = line.partition("\t")
            if not path or not is_config_path(path):
                continue
            before = _show(repo, parent, path) if parent and not status.startswith("A") else None
            after = _show(repo, sha, path) if not status.startswith("D") else None
            rec = build_record(
                record_id=f"git:{sha}:{path}", source="git", path=path, before_text=before, after_text=after,
                title=subject, body=body,
                link=f"https://github.com/{slug}/commit/{sha}" if slug else f"commit {sha[:12]} ({path})",
                commit=sha, date=date,
            )
            if rec is not None:
                yield rec
