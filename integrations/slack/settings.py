"""Slack settings from the environment: tokens, mode, who may apply, and the code host for Apply.

Three variables install ASAP in a workspace: ``SLACK_BOT_TOKEN`` plus either ``SLACK_APP_TOKEN`` (Socket
Mode: no public URL needed) or ``SLACK_SIGNING_SECRET`` (HTTP mode: Slack posts to ``/slack/events``).
Both may be set; then the HTTP route is served *and* the Socket Mode connection is opened.

Apply is refused unless the clicker is listed in ``ASAP_SLACK_APPLIERS`` (comma-separated user IDs,
e.g. ``U012ABCDEF``) or belongs to ``ASAP_SLACK_APPLIER_GROUP`` (user group IDs, ``S0123ABCD``; comma-separated). The shared
policy's names in :mod:`bot.auth` (``ASAP_APPLY_SLACK_USERS``, ``ASAP_APPLY_SLACK_GROUPS``) work too.
``SLACK_API_URL`` points the Web API client elsewhere (an Enterprise Grid proxy, or a test double).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, SecretStr

from bot.auth import ApplyPolicy
from bot.errors import AsapError

USER_ID_RE = re.compile(r"^[UW][A-Z0-9]{2,20}$")
GROUP_ID_RE = re.compile(r"^S[A-Z0-9]{2,20}$")
DEFAULT_API_URL = "https://slack.com/api/"
# ASAP_SLACK_APPLIERS / ASAP_SLACK_APPLIER_GROUP are the Slack names; the shared policy's names
# (bot.auth: ASAP_APPLY_SLACK_USERS / ASAP_APPLY_SLACK_GROUPS) are read too and merged.
USER_VARS = ("ASAP_SLACK_APPLIERS", "ASAP_APPLY_SLACK_USERS")
GROUP_VARS = ("ASAP_SLACK_APPLIER_GROUP", "ASAP_APPLY_SLACK_GROUPS")


class SlackSettings(BaseModel):
    """Validated Slack configuration (secrets kept out of repr and logs)."""

    model_config = ConfigDict(extra="forbid")

    bot_token: SecretStr
    signing_secret: SecretStr | None = None
    app_token: SecretStr | None = None
    api_url: str = DEFAULT_API_URL
    appliers: frozenset[str] = frozenset()
    applier_groups: frozenset[str] = frozenset()
    group_cache_s: float = 300.0

    @property
    def modes(self) -> list[Literal["http", "socket"]]:
        out: list[Literal["http", "socket"]] = []
        if self.signing_secret is not None:
            out.append("http")
        if self.app_token is not None:
            out.append("socket")
        return out

    @classmethod
    def enabled(cls, env: Mapping[str, str] | None = None) -> bool:
        """Slack is on when a signing secret or an app token is set (the runtime's route hook rule)."""
        env = os.environ if env is None else env
        return bool(env.get("SLACK_SIGNING_SECRET") or env.get("SLACK_APP_TOKEN"))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SlackSettings:
        """Read and check the variables; each problem names the variable and what was expected."""
        env = os.environ if env is None else env
        bot = (env.get("SLACK_BOT_TOKEN") or "").strip()
        if not bot:
            raise AsapError("SLACK_BOT_TOKEN is not set", field="SLACK_BOT_TOKEN",
                            hint="copy the Bot User OAuth Token (xoxb-...) from the app's OAuth & Permissions page")
        if not bot.startswith("xoxb-"):
            raise AsapError("expected a bot token starting with 'xoxb-'", field="SLACK_BOT_TOKEN",
                            hint="the Bot User OAuth Token, not a user (xoxp-) or app-level (xapp-) token")
        secret = (env.get("SLACK_SIGNING_SECRET") or "").strip() or None
        app = (env.get("SLACK_APP_TOKEN") or "").strip() or None
        if not secret and not app:
            raise AsapError("set SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET (HTTP mode)",
                            field="SLACK_APP_TOKEN")
        if app and not app.startswith("xapp-"):
            raise AsapError("expected an app-level token starting with 'xapp-'", field="SLACK_APP_TOKEN",
                            hint="Basic Information > App-Level Tokens, with the connections:write scope")
        if secret and not re.fullmatch(r"[0-9a-fA-F]{16,128}", secret):
            raise AsapError("expected the app's signing secret (hexadecimal)", field="SLACK_SIGNING_SECRET",
                            hint="Basic Information > App Credentials > Signing Secret")
        appliers: set[str] = set()
        for name in USER_VARS:
            for u in _csv(env.get(name)):
                if not USER_ID_RE.match(u):
                    raise AsapError(f"{u!r} is not a Slack user ID", field=name,
                                    hint="comma-separated member IDs like U012ABCDEF (profile > ... > Copy member ID)")
                appliers.add(u)
        groups: set[str] = set()
        for name in GROUP_VARS:
            for g in _csv(env.get(name)):
                if not GROUP_ID_RE.match(g):
                    raise AsapError(f"{g!r} is not a Slack user group ID", field=name,
                                    hint="a user group ID like S0123ABCD (not its @handle)")
                groups.add(g)
        api = (env.get("SLACK_API_URL") or DEFAULT_API_URL).strip()
        if not re.match(r"^https?://[^\s/]+(/\S*)?$", api):
            raise AsapError(f"{api!r} is not an http(s) URL", field="SLACK_API_URL")
        if not api.endswith("/"):
            api += "/"
        return cls(bot_token=SecretStr(bot), signing_secret=SecretStr(secret) if secret else None,
                   app_token=SecretStr(app) if app else None, api_url=api, appliers=frozenset(appliers),
                   applier_groups=frozenset(groups))

    def policy(self) -> ApplyPolicy:
        """The shared apply policy (:mod:`bot.auth`) with this workspace's users and groups."""
        return ApplyPolicy(slack_users=self.appliers, slack_groups=self.applier_groups)


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]
