"""History from merged GitHub pull requests that changed a sharding config (through PyGithub).

For each merged PR: title, body, URL, merge date, the changed YAML files with the config before (at the
base commit) and after (at the merge commit), and the run IDs and metrics its text mentions. PRs already
imported (by number) are not fetched again, so an update costs one listing call plus the new PRs.
PyGithub is used as the project would use it in production; ``base_url`` points it at GitHub Enterprise
or, in tests, at a local double.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import requests

from bot.errors import AsapError
from knowledge.history import HistoryRecord
from knowledge.history_sources.common import build_record, is_config_path

DEFAULT_MAX_PRS = 500


def make_client(token: str | None = None, base_url: str | None = None, *, retry: bool = True):  # type: ignore[no-untyped-def]
    """A PyGithub client; ``retry=False`` (tests) turns off retries and request spacing."""
    from github import Auth, Github

    kwargs: dict[str, object] = {}
    if base_url:
        kwargs["base_url"] = base_url.rstrip("/")
    if not retry:
        kwargs.update(retry=None, seconds_between_requests=None, seconds_between_writes=None)
    return Github(auth=Auth.Token(token) if token else None, timeout=15, **kwargs)


def _contents(repo, path: str, ref: str | None) -> str | None:  # type: ignore[no-untyped-def]
    from github import GithubException

    if not ref:
        return None
    try:
        got = repo.get_contents(path, ref=ref)
    except GithubException as exc:
        if exc.status == 404:
            return None
        raise
    if isinstance(got, list):
        return None
    if got.content is not None:
        return base64.b64decode(got.content).decode("utf-8", errors="replace")
    return None


def _from_patch(patch: str | None) -> tuple[str, str]:
    """Before/after text reconstructed from a unified diff hunk (context lines kept on both sides)."""
    before, after = [], []
    for line in (patch or "").splitlines():
        if line.startswith("@@"):
            continue
        if line.startswith("-"):
            before.append(line[1:])
        elif line.startswith("+"):
            after.append(line[1:])
        else:
            before.append(line[1:] if line.startswith(" ") else line)
            after.append(line[1:] if line.startswith(" ") else line)
    return "\n".join(before) + "\n", "\n".join(after) + "\n"


def github_history(
    full_name: str,
    *,
    client=None,  # type: ignore[no-untyped-def]
    token: str | None = None,
    base_url: str | None = None,
    skip_numbers: set[int] | None = None,
    max_prs: int = DEFAULT_MAX_PRS,
) -> Iterator[HistoryRecord]:
    """Records for merged PRs of ``owner/repo`` (most recently updated first) that changed a sharding config."""
    from github import GithubException

    if full_name.count("/") != 1 or not all(full_name.split("/")):
        raise AsapError(f"{full_name!r} is not a repository name", field="--github", hint="write OWNER/REPO")
    gh = client or make_client(token, base_url)
    skip = skip_numbers or set()
    try:
        repo = gh.get_repo(full_name)
        seen = 0
        for pr in repo.get_pulls(state="closed", sort="updated", direction="desc"):
            seen += 1
            if seen > max_prs:
                break
            if pr.merged_at is None or pr.number in skip:
                continue
            for f in pr.get_files():
                if not is_config_path(f.filename):
                    continue
                base_sha = pr.base.sha if pr.base else None
                after_ref = pr.merge_commit_sha or (pr.head.sha if pr.head else None)
                before = None if f.status == "added" else _contents(repo, f.filename, base_sha)
                after = None if f.status == "removed" else _contents(repo, f.filename, after_ref)
                if before is None and after is None and f.patch:
                    before, after = _from_patch(f.patch)
                rec = build_record(
                    record_id=f"github:{full_name}#{pr.number}:{f.filename}", source="github", path=f.filename,
                    before_text=before, after_text=after, title=pr.title or "", body=pr.body or "",
                    link=pr.html_url, pr_url=pr.html_url, commit=pr.merge_commit_sha,
                    date=pr.merged_at.isoformat() if pr.merged_at else None,
                )
                if rec is not None:
                    yield rec
    except GithubException as exc:
        msg = exc.data.get("message") if isinstance(exc.data, dict) else str(exc.data)
        raise AsapError(f"GitHub answered {exc.status}: {msg}", source=full_name, field="--github") from None
    except requests.exceptions.RequestException as exc:
        raise AsapError(f"cannot reach GitHub: {type(exc).__name__}", source=full_name, field="--github",
                        hint="check --github-url / GITHUB_API_URL and the network") from None
