"""GitHub as a code host, through PyGithub: apply commits via the git data API, pull requests, and the
PR-side operations the webhook handlers need (files of a PR, one upserted comment, commit statuses, check
runs, collaborator permission, team membership).

Authentication (:class:`GitHubAuthSettings`, from the environment; never from comment text):

* a token (``GITHUB_TOKEN``): :class:`github.Auth.Token`;
* a GitHub App (``GITHUB_APP_ID`` + ``GITHUB_PRIVATE_KEY`` or ``GITHUB_PRIVATE_KEY_PATH``):
  :class:`github.Auth.AppAuth` signs a JWT, and :meth:`AppAuth.get_installation_auth` gives an
  :class:`github.Auth.AppInstallationAuth` per installation, which PyGithub refreshes before the
  installation token expires. One client per installation is cached.

The API base URL comes only from ``GITHUB_API_URL`` (GitHub Enterprise, or the test double), parsed by
:func:`check_api_url`: ``https`` to any host, plain ``http`` only to a loopback host, and never with a
user-info part (``http://localhost@evil.com`` is a request to evil.com).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.errors import AsapError
from integrations.codehost.base import BotIdentity, CommitInfo, CommitResult, PullRequest, safe_branch, safe_repo_path

DEFAULT_API_URL = "https://api.github.com"
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
LOGIN_RETRY_S = 60.0
log = logging.getLogger("asap.github")


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_api_url(url: str) -> str:
    """``GITHUB_API_URL`` as a base URL PyGithub may send the token to, or an AsapError saying why not.

    The URL is parsed (scheme, user info, host, port), not prefix-matched: ``https`` to any host; ``http``
    only to ``localhost`` or a loopback address (a local GitHub double or a port-forward); no user info
    (``user@host``), query or fragment, since each can make the real host differ from what the prefix shows.
    """
    from urllib.parse import urlsplit

    raw = (url or "").strip().rstrip("/")
    try:
        parts = urlsplit(raw)
        host, _port = parts.hostname, parts.port  # .port raises ValueError for a malformed port
    except ValueError:
        raise AsapError(f"GITHUB_API_URL {raw!r} is not a valid URL", field="GITHUB_API_URL") from None
    if parts.scheme not in ("https", "http") or not host:
        raise AsapError(f"GITHUB_API_URL must be an https URL with a host (got {raw!r})", field="GITHUB_API_URL",
                        hint="e.g. https://api.github.com or https://github.example.com/api/v3")
    if "@" in parts.netloc:
        raise AsapError(f"GITHUB_API_URL must not carry user info before the host (got {raw!r}): the request "
                        f"would go to {host!r}", field="GITHUB_API_URL")
    if parts.query or parts.fragment:
        raise AsapError(f"GITHUB_API_URL must not have a query or fragment (got {raw!r})", field="GITHUB_API_URL")
    if parts.scheme == "http" and not _loopback(host):
        raise AsapError(f"GITHUB_API_URL must be https (got {raw!r}); plain http is allowed only to localhost "
                        "or a loopback address, since the token is sent with every request", field="GITHUB_API_URL")
    return raw


@dataclass(frozen=True)
class GitHubAuthSettings:
    """How ASAP talks to GitHub. Exactly one of ``token`` or ``app_id`` + ``private_key``."""

    api_url: str = DEFAULT_API_URL
    token: str | None = None
    app_id: str | None = None
    private_key: str | None = None
    bot_login: str | None = None
    bot: BotIdentity = field(default_factory=BotIdentity)
    retry: bool = True  # off in tests: PyGithub's default retry sleeps on 5xx/403

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> GitHubAuthSettings:
        env = dict(os.environ if env is None else env)
        key = env.get("GITHUB_PRIVATE_KEY")
        key_path = env.get("GITHUB_PRIVATE_KEY_PATH")
        if not key and key_path:
            try:
                key = Path(key_path).read_text(encoding="utf-8")
            except OSError as exc:
                raise AsapError(f"cannot read the GitHub App private key: {exc.strerror}", source=key_path,
                                field="GITHUB_PRIVATE_KEY_PATH") from None
        login = env.get("GITHUB_BOT_LOGIN") or None
        settings = cls(
            api_url=(env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
            token=env.get("GITHUB_TOKEN") or None,
            app_id=env.get("GITHUB_APP_ID") or None,
            private_key=key or None,
            bot_login=login,
            bot=BotIdentity(name=env.get("ASAP_GIT_NAME") or "asap-bot",
                            email=env.get("ASAP_GIT_EMAIL") or "asap-bot@users.noreply.github.com", login=login),
        )
        settings.check()
        return settings

    def check(self) -> None:
        if self.app_id and not self.private_key:
            raise AsapError("GITHUB_APP_ID is set but no private key", field="GITHUB_PRIVATE_KEY",
                            hint="set GITHUB_PRIVATE_KEY (PEM text) or GITHUB_PRIVATE_KEY_PATH")
        if not self.token and not self.app_id:
            raise AsapError("no GitHub credentials", field="GITHUB_TOKEN",
                            hint="set GITHUB_TOKEN, or GITHUB_APP_ID and GITHUB_PRIVATE_KEY for a GitHub App")
        check_api_url(self.api_url)


class GitHubClients:
    """PyGithub clients: one for a token, or one per App installation (tokens refreshed by PyGithub)."""

    def __init__(self, settings: GitHubAuthSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._login_lock = threading.Lock()
        self._clients: dict[int | None, Any] = {}
        self._login: str | None = settings.bot_login
        self._login_failed_at: float | None = None

    def _kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"base_url": self.settings.api_url, "lazy": True, "timeout": 30}
        if not self.settings.retry:
            kw.update(retry=None, seconds_between_requests=None, seconds_between_writes=None)
        return kw

    def _app_auth(self) -> Any:
        from github import Auth

        return Auth.AppAuth(int(self.settings.app_id) if str(self.settings.app_id).isdigit() else self.settings.app_id,
                            self.settings.private_key)

    def client(self, installation_id: int | None = None) -> Any:
        """A :class:`github.Github` for the token, or for ``installation_id`` of the App."""
        from github import Auth, Github

        key = None if self.settings.token else installation_id
        with self._lock:
            if key in self._clients:
                return self._clients[key]
            if self.settings.token:
                gh = Github(auth=Auth.Token(self.settings.token), **self._kwargs())
            else:
                if installation_id is None:
                    raise AsapError("GitHub App credentials need the installation of the repository",
                                    field="installation", hint="the webhook payload carries installation.id")
                gh = Github(auth=self._app_auth().get_installation_auth(int(installation_id)), **self._kwargs())
            self._clients[key] = gh
            return gh

    def installation_for(self, repo: str) -> int:
        """The App's installation on ``repo`` (for ``asap apply`` outside a webhook)."""
        from github import GithubIntegration

        kw = {k: v for k, v in self._kwargs().items() if k not in ("lazy",)}
        from github import GithubException

        integ = GithubIntegration(auth=self._app_auth(), **kw)
        owner, name = repo.split("/", 1)
        try:
            return int(integ.get_repo_installation(owner, name).id)
        except GithubException as exc:
            raise AsapError(f"the GitHub App {self.settings.app_id} cannot reach {repo}: HTTP {exc.status}",
                            field="GITHUB_APP_ID", hint="install the App on the repository; check the app id and key") from None

    @property
    def known_login(self) -> str | None:
        """The login if already known (configured or looked up); never makes a request."""
        return self._login

    def bot_login(self) -> str | None:
        """The login ASAP comments as: configured, else the token's user (``GET /user``, once), else
        ``<app slug>[bot]`` (``GET /app``, once). A failed look-up is retried at most once a minute; meanwhile
        own comments are still recognised by their signed marker."""
        if self._login:
            return self._login
        if self._login_failed_at is not None and time.monotonic() - self._login_failed_at < LOGIN_RETRY_S:
            return None
        from github import GithubIntegration

        with self._login_lock:  # concurrent jobs: one look-up, the others wait for its answer
            if self._login:
                return self._login
            try:
                if self.settings.token:
                    self._login = str(self.client().get_user().login)
                else:
                    kw = {k: v for k, v in self._kwargs().items() if k not in ("lazy",)}
                    self._login = f"{GithubIntegration(auth=self._app_auth(), **kw).get_app().slug}[bot]"
            except Exception as exc:  # noqa: BLE001 - any failure: unknown for now, retried later
                self._login_failed_at = time.monotonic()
                log.warning("could not look up the bot's GitHub login: %s", exc)
                return None
        return self._login

    def host(self, repo: str, installation_id: int | None = None) -> GitHubHost:
        if self.settings.app_id and not self.settings.token and installation_id is None:
            installation_id = self.installation_for(repo)
        bot = BotIdentity(name=self.settings.bot.name, email=self.settings.bot.email, login=self.bot_login())
        return GitHubHost(self.client(installation_id), repo, bot=bot)


class ApplyRaceLost(AsapError):
    """Another apply created the same bot branch (HTTP 422 "Reference already exists") or its pull request
    ("A pull request already exists") between this apply's checks and its write: that apply won."""

    def __init__(self, branch: str, repo: str) -> None:
        self.branch = branch
        super().__init__(f"another apply is writing {branch} at the same moment", source=repo, field="branch")


class ChecksRefused(AsapError):
    """GitHub refused to create a check run (HTTP 403): only a GitHub App installation with ``checks: write``
    may; a personal or OAuth token gets "You must authenticate via a GitHub App.", an App or Actions token
    without the permission "Resource not accessible by integration"."""

    def __init__(self, repo: str, status: int, said: str) -> None:
        self.said = said
        super().__init__(f"GitHub refused to create a check run: HTTP {status} {said}", source=repo,
                         hint="check runs need a GitHub App with the checks: write permission")


@dataclass(frozen=True)
class PRFileChange:
    path: str
    status: str  # added | modified | removed | renamed | ...
    previous_path: str | None = None


@dataclass(frozen=True)
class PRInfo:
    number: int
    head_sha: str
    head_ref: str
    base_ref: str
    base_sha: str
    body: str
    author: str
    url: str


class GitHubHost:
    """One repository on GitHub as a :class:`~integrations.codehost.base.CodeHost`, plus PR-side operations."""

    def __init__(self, gh: Any, repo: str, *, bot: BotIdentity | None = None) -> None:
        from github import GithubException

        self._exc = GithubException
        self.gh = gh
        self.full_name = repo
        self._bot = bot or BotIdentity()
        self.repo = gh.get_repo(repo)  # lazy when the client is (GitHubClients makes lazy clients)
        self._default: str | None = None

    def _call(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except self._exc as exc:
            msg = exc.data.get("message") if isinstance(exc.data, dict) else str(exc.data)
            raise AsapError(f"GitHub {what} failed: HTTP {exc.status} {msg}", source=self.full_name) from None

    # ---------------------------------------------------------------- CodeHost
    @property
    def name(self) -> str:
        return self.full_name

    @property
    def bot(self) -> BotIdentity:
        return self._bot

    def default_branch(self) -> str:
        if self._default is None:
            self._default = self._call("reading the repository", lambda: self.repo.default_branch)
        return self._default  # type: ignore[return-value]

    def read_file(self, path: str, ref: str) -> str | None:
        from github import UnknownObjectException

        path = safe_repo_path(path)
        try:
            got = self.repo.get_contents(path, ref=ref)
        except UnknownObjectException:
            return None
        except self._exc as exc:
            raise AsapError(f"GitHub contents of {path}@{ref} failed: HTTP {exc.status}", source=self.full_name) from None
        if isinstance(got, list) or got.type != "file":
            return None
        try:
            return got.decoded_content.decode("utf-8")
        except UnicodeDecodeError:
            raise AsapError("not UTF-8 text", source=f"{self.full_name}:{path}@{ref}") from None

    def _ref(self, branch: str) -> Any | None:
        from github import UnknownObjectException

        try:
            ref = self.repo.get_git_ref(f"heads/{branch}")
            _ = ref.object.sha  # lazy clients fetch on first access
            return ref
        except UnknownObjectException:
            return None
        except self._exc as exc:
            raise AsapError(f"GitHub ref heads/{branch} failed: HTTP {exc.status}", source=self.full_name) from None

    def _commit_info(self, sha: str) -> CommitInfo:
        c = self._call("reading a commit", self.repo.get_git_commit, sha)
        return CommitInfo(sha=c.sha, parents=tuple(p.sha for p in c.parents), author_email=c.author.email or "",
                          committer_email=c.committer.email or "", message=c.message or "")

    def branch_head(self, branch: str) -> CommitInfo | None:
        ref = self._ref(branch)
        return None if ref is None else self._commit_info(ref.object.sha)

    def commit_file(self, branch: str, base: str, path: str, text: str, message: str) -> CommitResult:
        from github import InputGitAuthor, InputGitTreeElement

        branch, path = safe_branch(branch), safe_repo_path(path)
        base_ref = self._ref(base)
        if base_ref is None:
            raise AsapError(f"no branch {base!r} to build on", source=self.full_name, field="base")
        base_commit = self._call("reading the base commit", self.repo.get_git_commit, base_ref.object.sha)
        blob = self._call("creating a blob", self.repo.create_git_blob, text, "utf-8")
        tree = self._call("creating a tree", self.repo.create_git_tree,
                          [InputGitTreeElement(path, "100644", "blob", sha=blob.sha)], base_tree=base_commit.tree)
        ref = self._ref(branch)
        if ref is not None:
            head = self._call("reading the branch head", self.repo.get_git_commit, ref.object.sha)
            if [p.sha for p in head.parents] == [base_commit.sha] and head.tree.sha == tree.sha:
                return CommitResult(sha=head.sha, changed=False)
        who = InputGitAuthor(self._bot.name, self._bot.email)
        commit = self._call("creating the commit", self.repo.create_git_commit, message, tree, [base_commit],
                            author=who, committer=who)
        if ref is None:
            try:
                self.repo.create_git_ref(f"refs/heads/{branch}", commit.sha)
            except self._exc as exc:
                if exc.status == 422 and "already exists" in str(exc.data):
                    raise ApplyRaceLost(branch, self.full_name) from None
                raise AsapError(f"GitHub creating the branch failed: HTTP {exc.status}", source=self.full_name) from None
        else:
            self._call("moving the branch", ref.edit, commit.sha, force=True)
        return CommitResult(sha=commit.sha, changed=True)

    def _pull(self, pr: Any) -> PullRequest:
        return PullRequest(number=pr.number, url=pr.html_url, head_branch=pr.head.ref, base_branch=pr.base.ref,
                           title=pr.title or "", body=pr.body or "", head_sha=pr.head.sha)

    def open_pulls(self) -> list[PullRequest]:
        pulls = self._call("listing pull requests", lambda: list(self.repo.get_pulls(state="open")))
        return [self._pull(p) for p in pulls if (p.head.ref or "").startswith("asap/")]

    def create_pull(self, branch: str, base: str, title: str, body: str) -> PullRequest:
        try:
            pr = self.repo.create_pull(base=base, head=branch, title=title, body=body)
        except self._exc as exc:
            if exc.status == 422 and "already exists" in str(exc.data):
                raise ApplyRaceLost(branch, self.full_name) from None
            raise AsapError(f"GitHub opening the pull request failed: HTTP {exc.status}", source=self.full_name) from None
        return self._pull(pr)

    def wait_for_pull(self, branch: str, *, timeout_s: float = 10.0, every_s: float = 0.5) -> PullRequest | None:
        """The open ``asap/`` pull request from ``branch``, waiting a little for one another apply is opening."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = next((p for p in self.open_pulls() if p.head_branch == branch), None)
            if found is not None or time.monotonic() >= deadline:
                return found
            time.sleep(every_s)

    def update_pull(self, pull: PullRequest, title: str, body: str) -> PullRequest:
        pr = self._call("reading the pull request", self.repo.get_pull, pull.number)
        self._call("updating the pull request", pr.edit, title=title, body=body)
        return PullRequest(number=pull.number, url=pull.url, head_branch=pull.head_branch, base_branch=pull.base_branch,
                           title=title, body=body, head_sha=pull.head_sha)

    # ---------------------------------------------------------------- PR side
    def pull_info(self, number: int) -> PRInfo:
        pr = self._call("reading the pull request", self.repo.get_pull, int(number))
        return PRInfo(number=pr.number, head_sha=pr.head.sha, head_ref=pr.head.ref, base_ref=pr.base.ref,
                      base_sha=pr.base.sha, body=pr.body or "", author=pr.user.login if pr.user else "", url=pr.html_url)

    def pull_files(self, number: int, limit: int = 300) -> list[PRFileChange]:
        pr = self._call("reading the pull request", self.repo.get_pull, int(number))
        out: list[PRFileChange] = []
        for f in self._call("listing changed files", lambda: list(pr.get_files()[:limit])):
            out.append(PRFileChange(path=f.filename, status=f.status, previous_path=f.previous_filename))
        return out

    def _own(self, c: Any, marker: str) -> bool:
        """ASAP's comment for ``marker``: it starts with the (signed) marker AND is by the bot's login.

        The login is known (``GITHUB_BOT_LOGIN``, or looked up once); when the look-up failed, the signed
        marker alone decides (a person can copy it, but then editing their comment is refused by GitHub).
        """
        if not (c.body or "").startswith(marker):
            return False
        login = self._bot.login
        return login is None or bool(c.user and c.user.login.lower() == login.lower())

    def find_comment(self, number: int, marker: str) -> int | None:
        """The id of the bot's comment carrying ``marker`` on issue/PR ``number``, if any."""
        issue = self.repo.get_issue(int(number))
        for c in self._call("listing comments", lambda: list(issue.get_comments())):
            if self._own(c, marker):
                return int(c.id)
        return None

    def upsert_comment(self, number: int, marker: str, body: str, *, legacy: str | None = None) -> tuple[int, bool]:
        """Edit the bot's comment carrying ``marker`` on issue/PR ``number``, or create it. -> (id, created).

        ``legacy`` is the unsigned marker an older ASAP wrote (``<!-- asap:review -->``): a comment starting
        with it is adopted only when its author is the bot's known login.
        """
        issue = self.repo.get_issue(int(number))
        comments = self._call("listing comments", lambda: list(issue.get_comments()))
        login = self._bot.login
        for c in comments:
            adopt = bool(legacy and login and (c.body or "").startswith(legacy) and c.user
                         and c.user.login.lower() == login.lower())
            if self._own(c, marker) or adopt:
                if c.body != body:
                    self._call("editing the comment", c.edit, body)
                return c.id, False
        made = self._call("posting the comment", issue.create_comment, body)
        return made.id, True

    def set_status(self, sha: str, state: str, description: str, context: str, target_url: str | None = None) -> None:
        kw: dict[str, Any] = {"state": state, "description": description[:140], "context": context}
        if target_url:
            kw["target_url"] = target_url
        commit = self.repo.get_commit(sha)
        self._call("setting the commit status", commit.create_status, **kw)

    def create_check_run(self, name: str, head_sha: str, conclusion: str, output: dict[str, Any]) -> int:
        """A completed check run on ``head_sha``; its id. :class:`ChecksRefused` when GitHub answers 403."""
        from github import RateLimitExceededException

        try:
            run = self.repo.create_check_run(name=name, head_sha=head_sha, status="completed", conclusion=conclusion,
                                             output=output)
        except RateLimitExceededException as exc:
            raise AsapError(f"GitHub creating the check run failed: HTTP {exc.status} (rate limited)",
                            source=self.full_name) from None
        except self._exc as exc:
            said = str(exc.data.get("message") if isinstance(exc.data, dict) else exc.data)
            if exc.status == 403:
                raise ChecksRefused(self.full_name, exc.status, said) from None
            raise AsapError(f"GitHub creating the check run failed: HTTP {exc.status} {said}", source=self.full_name) from None
        return int(run.id)

    def update_check_run(self, run_id: int, output: dict[str, Any]) -> None:
        """Send more of a check run's output (GitHub appends the annotations to those already there)."""
        run = self.repo.get_check_run(int(run_id))  # lazy: no request until the edit
        self._call("updating the check run", run.edit, output=output)

    def permission(self, user: str) -> str:
        """``admin`` | ``maintain`` | ``write`` | ``triage`` | ``read`` | ``none`` for ``user`` on this repository."""
        from github import UnknownObjectException

        try:
            return str(self.repo.get_collaborator_permission(user))
        except UnknownObjectException:
            return "none"
        except self._exc as exc:
            raise AsapError(f"GitHub permission check failed: HTTP {exc.status}", source=self.full_name) from None

    def in_team(self, team: str, user: str) -> bool:
        """True when ``user`` is an active member of ``org/slug``."""
        from github import UnknownObjectException

        org, slug = team.split("/", 1)
        try:
            t = self.gh.get_organization(org).get_team_by_slug(slug)
            return t.get_team_membership(user).state == "active"
        except UnknownObjectException:
            return False
        except self._exc as exc:
            raise AsapError(f"GitHub team check failed: HTTP {exc.status}", source=team) from None
