"""The GitHub integration's settings and shared clients, from the environment only.

``GITHUB_WEBHOOK_SECRET`` (required: enables ``POST /github/webhook``; also keys the signed markers of
ASAP's own comments unless ``ASAP_GITHUB_MARKER_SECRET`` is set), ``GITHUB_TOKEN`` or
``GITHUB_APP_ID`` + ``GITHUB_PRIVATE_KEY``/``GITHUB_PRIVATE_KEY_PATH`` (see
:mod:`integrations.codehost.github`), ``GITHUB_API_URL``, ``GITHUB_BOT_LOGIN``, ``ASAP_GITHUB_MENTION``
(default ``asap``), ``ASAP_APPLY_GITHUB_TEAMS`` (comma-separated ``org/slug``, besides writers and the
teams in each repository's ``.asap.yml``; read by :meth:`bot.auth.ApplyPolicy.from_env`), ``ASAP_RUNS_DIR``,
``ASAP_GITHUB_REVIEW_REPORT`` (``checks``, the default: the PR review's verdict is a check run, falling back
to a commit status on a repository where GitHub refuses check runs to these credentials; ``status``: always a
commit status, as before check runs existed).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from bot.auth import ApplyPolicy
from bot.errors import AsapError
from integrations.codehost.github import GitHubAuthSettings, GitHubClients

if TYPE_CHECKING:
    from bot.runtime.context import RuntimeContext

EXTRAS_KEY = "github"
REVIEW_REPORTS = ("checks", "status")


@dataclass
class GitHubIntegration:
    """Everything the webhook route and the job handlers share (kept in ``ctx.extras['github']``)."""

    webhook_secret: bytes
    auth: GitHubAuthSettings | None
    mention: str = "asap"
    apply_teams: tuple[str, ...] = ()
    runs_dir: str | None = None
    marker_key: bytes = b""  # keys comment markers (integrations.github.markdown); the webhook secret if empty
    review_report: Literal["checks", "status"] = "checks"  # how the PR review's verdict is shown (module docstring)
    checks_refused: dict[str, str] = field(default_factory=dict)  # repo -> why GitHub refused check runs (this process)
    _clients: GitHubClients | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> GitHubIntegration:
        env = dict(os.environ if env is None else env)
        secret = env.get("GITHUB_WEBHOOK_SECRET", "")
        if not secret:
            raise AsapError("GITHUB_WEBHOOK_SECRET is not set", field="GITHUB_WEBHOOK_SECRET",
                            hint="the same secret as in the repository's or App's webhook settings")
        mention = env.get("ASAP_GITHUB_MENTION") or "asap"
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}(?:\[bot\])?", mention):
            raise AsapError(f"ASAP_GITHUB_MENTION={mention!r} is not a GitHub login", field="ASAP_GITHUB_MENTION")
        teams = ApplyPolicy.from_env(env).github_teams  # the shared apply settings (bot.auth)
        report = (env.get("ASAP_GITHUB_REVIEW_REPORT") or "checks").strip().lower()
        if report not in REVIEW_REPORTS:
            raise AsapError(f"ASAP_GITHUB_REVIEW_REPORT={report!r} is not one of {', '.join(REVIEW_REPORTS)}",
                            field="ASAP_GITHUB_REVIEW_REPORT",
                            hint="checks (a check run; a commit status where GitHub refuses check runs) or status")
        auth = GitHubAuthSettings.from_env(env) if (env.get("GITHUB_TOKEN") or env.get("GITHUB_APP_ID")) else None
        return cls(webhook_secret=secret.encode(), auth=auth, mention=mention, apply_teams=teams,
                   runs_dir=env.get("ASAP_RUNS_DIR") or None, review_report=report,  # type: ignore[arg-type]
                   marker_key=(env.get("ASAP_GITHUB_MARKER_SECRET") or "").encode())

    @property
    def marker_secret(self) -> bytes:
        """The server secret that signs ASAP's comment markers (never sent anywhere)."""
        return self.marker_key or self.webhook_secret

    @property
    def clients(self) -> GitHubClients:
        if self.auth is None:
            raise AsapError("no GitHub credentials to reply with", field="GITHUB_TOKEN",
                            hint="set GITHUB_TOKEN, or GITHUB_APP_ID and GITHUB_PRIVATE_KEY")
        if self._clients is None:
            self._clients = GitHubClients(self.auth)
        return self._clients

    @property
    def bot_login(self) -> str | None:
        """The login ASAP comments as, when known without a network call: ``GITHUB_BOT_LOGIN``, else the one
        looked up once (``GET /user`` in token mode, the App's slug) by :meth:`lookup_login`."""
        if self.auth is None:
            return None
        if self.auth.bot_login:
            return self.auth.bot_login
        return self._clients.known_login if self._clients is not None else None

    def lookup_login(self) -> str | None:
        """Look the bot's login up once (blocking; run it in a thread). None when it cannot be learned."""
        if self.auth is None:
            return None
        return self.clients.bot_login()

    @property
    def app_id(self) -> str | None:
        return self.auth.app_id if self.auth else None

    def runs(self) -> Any:
        from bot.runs.open import open_runs

        return open_runs(runs_dir=self.runs_dir)


def integration(ctx: RuntimeContext) -> GitHubIntegration:
    """The context's GitHub integration, built from the environment on first use (worker processes)."""
    got = ctx.extras.get(EXTRAS_KEY)
    if got is None:
        got = GitHubIntegration.from_env()
        ctx.extras[EXTRAS_KEY] = got
    return got  # type: ignore[no-any-return]
