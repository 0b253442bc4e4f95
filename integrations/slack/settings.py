"""Slack settings from the environment: tokens, mode, who may apply, and the code host for Apply.

Three variables install ASAP in a workspace: ``SLACK_BOT_TOKEN`` plus either ``SLACK_APP_TOKEN`` (Socket
Mode: no public URL needed) or ``SLACK_SIGNING_SECRET`` (HTTP mode: Slack posts to ``/slack/events``).
Both may be set; then the HTTP route is served *and* the Socket Mode connection is opened.

Apply is refused unless the clicker is listed in ``ASAP_APPLY_SLACK_USERS`` (comma-separated member IDs,
e.g. ``U012ABCDEF``) or belongs to a group in ``ASAP_APPLY_SLACK_GROUPS`` (user group IDs, ``S0123ABCD``).
Those names are read by the shared policy, :meth:`bot.auth.ApplyPolicy.from_env`, like every front end's;
the old ``ASAP_SLACK_APPLIERS`` / ``ASAP_SLACK_APPLIER_GROUP`` still work there with a deprecation warning.
``SLACK_API_URL`` points the Web API client elsewhere (an Enterprise Grid proxy, or a test double).
``ASAP_SLACK_PROGRESS_PER_MIN`` is how many progress updates a minute this process may spend from
``chat.update``'s rate-limit tier (default 20 of its 50); final answers always keep the rest
(:mod:`integrations.slack.pacing`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, SecretStr

from bot.auth import ApplyPolicy
from bot.errors import AsapError

DEFAULT_API_URL = "https://slack.com/api/"


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
    progress_per_min: float = 20.0

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
        policy = ApplyPolicy.from_env(env)  # who may apply: one set of names for every front end
        api = (env.get("SLACK_API_URL") or DEFAULT_API_URL).strip()
        if not re.match(r"^https?://[^\s/]+(/\S*)?$", api):
            raise AsapError(f"{api!r} is not an http(s) URL", field="SLACK_API_URL")
        if not api.endswith("/"):
            api += "/"
        per_min = (env.get("ASAP_SLACK_PROGRESS_PER_MIN") or "20").strip()
        try:
            progress = float(per_min)
        except ValueError:
            progress = -1.0
        if not 0 <= progress <= 1000:
            raise AsapError(f"expected progress updates per minute between 0 and 1000, got {per_min!r}",
                            field="ASAP_SLACK_PROGRESS_PER_MIN", hint="0 turns progress updates off")
        return cls(bot_token=SecretStr(bot), signing_secret=SecretStr(secret) if secret else None,
                   app_token=SecretStr(app) if app else None, api_url=api, appliers=policy.slack_users,
                   applier_groups=policy.slack_groups, progress_per_min=progress)

    def policy(self) -> ApplyPolicy:
        """The shared apply policy (:mod:`bot.auth`) with this workspace's users and groups."""
        return ApplyPolicy(slack_users=self.appliers, slack_groups=self.applier_groups)

