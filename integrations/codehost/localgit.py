"""The embedded code host: a git repository on disk, driven through the ``git`` command.

The branch is the change: :meth:`LocalGitHost.commit_file` writes ONE commit on top of the default
branch with git's plumbing (``hash-object``, a private index, ``write-tree``, ``commit-tree``,
``update-ref`` with the old value as a compare-and-swap), so the person's working tree, index and
checked-out branch are never touched. A "pull request" is the ``asap/*`` branch plus a small JSON
record under ``.git/asap/pulls/`` holding its number, title and body; it is open while the branch exists
and is not merged into the default branch.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from bot.errors import AsapError
from integrations.codehost.base import BotIdentity, CommitInfo, CommitResult, PullRequest, safe_branch, safe_repo_path

GIT_TIMEOUT_S = 30.0


class LocalGitHost:
    """A local git repository as a :class:`~integrations.codehost.base.CodeHost`."""

    def __init__(self, repo: str | Path, *, bot: BotIdentity | None = None, default_branch: str | None = None) -> None:
        self.repo = Path(repo).expanduser().resolve()
        self._bot = bot or BotIdentity()
        if not self.repo.is_dir():
            raise AsapError("repository folder does not exist", source=str(self.repo), field="repo")
        top = self._git("rev-parse", "--show-toplevel", check=False)
        if top.returncode != 0:
            raise AsapError("not a git repository", source=str(self.repo), field="repo",
                            hint="point --repo at a folder created by git init / git clone")
        self.repo = Path(top.stdout.strip()).resolve()
        self.git_dir = Path(self._out("rev-parse", "--absolute-git-dir"))
        self._default = default_branch

    # ---------------------------------------------------------------- plumbing
    def _git(self, *args: str, check: bool = True, input: bytes | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", **(env or {})}
        try:
            proc = subprocess.run(
                ["git", "-c", "core.quotepath=off", *args], cwd=self.repo, input=input, capture_output=True,
                env=full_env, timeout=GIT_TIMEOUT_S,
            )
        except FileNotFoundError:
            raise AsapError("git is not installed", hint="install git to use the local code host") from None
        except subprocess.TimeoutExpired:
            raise AsapError(f"git {args[0]} took longer than {GIT_TIMEOUT_S:.0f} s", source=str(self.repo)) from None
        out = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                          proc.stderr.decode("utf-8", "replace"))
        if check and out.returncode != 0:
            raise AsapError(f"git {args[0]} failed: {out.stderr.strip()[:300]}", source=str(self.repo))
        return out

    def _out(self, *args: str, **kw: object) -> str:
        return self._git(*args, **kw).stdout.strip()  # type: ignore[arg-type]

    def _bot_env(self) -> dict[str, str]:
        b = self._bot
        return {"GIT_AUTHOR_NAME": b.name, "GIT_AUTHOR_EMAIL": b.email,
                "GIT_COMMITTER_NAME": b.name, "GIT_COMMITTER_EMAIL": b.email}

    def _resolve(self, ref: str) -> str | None:
        got = self._git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
        return got.stdout.strip() if got.returncode == 0 else None

    # ---------------------------------------------------------------- CodeHost
    @property
    def name(self) -> str:
        return str(self.repo)

    @property
    def bot(self) -> BotIdentity:
        return self._bot

    def default_branch(self) -> str:
        """The configured branch, else the checked-out branch, else main/master."""
        if self._default:
            return self._default
        head = self._git("symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip()
        if head and not head.startswith("asap/"):
            return head
        for cand in ("main", "master"):
            if self._resolve(f"refs/heads/{cand}"):
                return cand
        raise AsapError("cannot tell the repository's default branch", source=str(self.repo),
                        hint="check out the branch proposals should target (e.g. main)")

    def read_file(self, path: str, ref: str) -> str | None:
        path = safe_repo_path(path)
        sha = self._resolve(ref)
        if sha is None:
            raise AsapError(f"no branch or commit {ref!r}", source=str(self.repo), field="ref")
        proc = subprocess.run(["git", "cat-file", "blob", f"{sha}:{path}"], cwd=self.repo, capture_output=True,
                              timeout=GIT_TIMEOUT_S)
        if proc.returncode != 0:
            return None
        raw = proc.stdout
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise AsapError("not UTF-8 text", source=f"{self.repo}:{path}@{ref}") from None

    def branch_head(self, branch: str) -> CommitInfo | None:
        sha = self._resolve(f"refs/heads/{branch}")
        if sha is None:
            return None
        fields = self._git("log", "-1", "--format=%H%x00%P%x00%ae%x00%ce%x00%B", sha).stdout.split("\x00")
        return CommitInfo(sha=fields[0], parents=tuple(fields[1].split()), author_email=fields[2],
                          committer_email=fields[3], message=fields[4].strip())

    def commit_file(self, branch: str, base: str, path: str, text: str, message: str) -> CommitResult:
        branch, path = safe_branch(branch), safe_repo_path(path)
        checked_out = self._git("symbolic-ref", "--quiet", "HEAD", check=False).stdout.strip()
        if checked_out == f"refs/heads/{branch}":
            raise AsapError(f"{branch} is checked out in {self.repo}; ASAP will not move the branch under your work",
                            field="branch", hint="check out another branch first")
        base_sha = self._resolve(f"refs/heads/{base}") or self._resolve(base)
        if base_sha is None:
            raise AsapError(f"no branch {base!r} to build on", source=str(self.repo), field="base")
        old = self._resolve(f"refs/heads/{branch}")
        blob = self._git("hash-object", "-w", "--stdin", input=text.encode("utf-8")).stdout.strip()
        mode = "100644"
        listing = self._git("ls-tree", base_sha, "--", path, check=False).stdout.split()
        if listing and listing[1] == "blob":
            mode = listing[0]
        with tempfile.TemporaryDirectory(prefix="asap-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self._git("read-tree", base_sha, env=env)
            self._git("update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=env)
            tree = self._git("write-tree", env=env).stdout.strip()
        if old is not None:
            head = self.branch_head(branch)
            old_tree = self._out("rev-parse", f"{old}^{{tree}}")
            if head is not None and head.parents == (base_sha,) and old_tree == tree:
                return CommitResult(sha=old, changed=False, diff=self._out("diff", base_sha, old, "--", path) + "\n")
        commit = self._git("commit-tree", tree, "-p", base_sha, "-F", "-", input=message.encode("utf-8"),
                           env=self._bot_env()).stdout.strip()
        # Compare-and-swap: fails if someone moved the branch since we looked.
        self._git("update-ref", "-m", "asap apply", f"refs/heads/{branch}", commit, old or "0" * 40)
        diff = self._git("diff", base_sha, commit, "--", path).stdout
        return CommitResult(sha=commit, changed=True, diff=diff)

    # ---------------------------------------------------------------- "pull requests"
    def _pulls_dir(self) -> Path:
        return self.git_dir / "asap" / "pulls"

    def _record_path(self, branch: str) -> Path:
        return self._pulls_dir() / (safe_branch(branch).replace("/", "__") + ".json")

    def _pull_of(self, data: dict[str, object]) -> PullRequest:
        branch = str(data["branch"])
        return PullRequest(number=int(data["number"]), url=f"{self.repo}#{branch}",  # type: ignore[arg-type]
                           head_branch=branch, base_branch=str(data["base"]), title=str(data["title"]),
                           body=str(data["body"]), head_sha=self._resolve(f"refs/heads/{branch}") or "")

    def open_pulls(self) -> list[PullRequest]:
        out: list[PullRequest] = []
        folder = self._pulls_dir()
        if not folder.is_dir():
            return out
        for f in sorted(folder.glob("*.json")):
            try:
                data = json.loads(f.read_text(encoding="utf-8"))
                branch = safe_branch(str(data["branch"]))
            except (OSError, ValueError, KeyError, AsapError):
                continue
            head = self._resolve(f"refs/heads/{branch}")
            base = self._resolve(f"refs/heads/{data.get('base', '')}")
            if head is None or base is None:
                continue
            merged = self._git("merge-base", "--is-ancestor", head, base, check=False).returncode == 0
            if not merged:
                out.append(self._pull_of(data))
        return out

    def create_pull(self, branch: str, base: str, title: str, body: str) -> PullRequest:
        folder = self._pulls_dir()
        folder.mkdir(parents=True, exist_ok=True)
        numbers = [int(json.loads(f.read_text(encoding="utf-8")).get("number", 0)) for f in folder.glob("*.json")]
        data = {"number": max(numbers, default=0) + 1, "branch": safe_branch(branch), "base": base,
                "title": title, "body": body}
        self._record_path(branch).write_text(json.dumps(data, indent=1), encoding="utf-8")
        return self._pull_of(data)

    def update_pull(self, pull: PullRequest, title: str, body: str) -> PullRequest:
        data = {"number": pull.number, "branch": pull.head_branch, "base": pull.base_branch, "title": title, "body": body}
        self._record_path(pull.head_branch).write_text(json.dumps(data, indent=1), encoding="utf-8")
        return self._pull_of(data)

    def diff(self, base: str, branch: str) -> str:
        """``git diff base...branch`` as text (what ``asap apply`` prints)."""
        return self._git("diff", f"{base}...refs/heads/{safe_branch(branch)}").stdout
