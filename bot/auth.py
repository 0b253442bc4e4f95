"""Who may apply a proposal: one policy object for every front end (Atlantis-style: apply is gated).

* GitHub: people with ``write``, ``maintain`` or ``admin`` permission on the repository (asked through the
  API, never taken from the comment), or active members of a listed team (``org/slug``, from
  ``ASAP_APPLY_GITHUB_TEAMS`` and the default branch's ``.asap.yml``).
* Slack: user IDs in ``ASAP_APPLY_SLACK_USERS`` or members of a user group in ``ASAP_APPLY_SLACK_GROUPS``
  (the Slack front end looks the groups up and passes them in).
* CLI: the person at the terminal owns the local repository.

Every decision carries the sentence to show the person, so a refusal is never silent.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


class PermissionSource(Protocol):
    """What the GitHub check needs from a host (:class:`integrations.codehost.github.GitHubHost` has it)."""

    @property
    def name(self) -> str: ...

    def permission(self, user: str) -> str: ...

    def in_team(self, team: str, user: str) -> bool: ...


def _csv(value: str | None) -> frozenset[str]:
    return frozenset(v.strip() for v in (value or "").split(",") if v.strip())


@dataclass(frozen=True)
class ApplyPolicy:
    github_teams: tuple[str, ...] = ()
    slack_users: frozenset[str] = field(default_factory=frozenset)
    slack_groups: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApplyPolicy:
        env = os.environ if env is None else env
        return cls(github_teams=tuple(sorted(_csv(env.get("ASAP_APPLY_GITHUB_TEAMS")))),
                   slack_users=_csv(env.get("ASAP_APPLY_SLACK_USERS")),
                   slack_groups=_csv(env.get("ASAP_APPLY_SLACK_GROUPS")))

    def check_github(self, login: str, host: PermissionSource, extra_teams: Iterable[str] = ()) -> Decision:
        """Write permission on the repository, or membership of a listed team."""
        if not login:
            return Decision(False, "the request has no GitHub user")
        perm = host.permission(login)
        if perm in WRITE_PERMISSIONS:
            return Decision(True, f"@{login} has {perm} permission on {host.name}")
        teams = list(dict.fromkeys([*self.github_teams, *extra_teams]))
        for team in teams:
            if host.in_team(team, login):
                return Decision(True, f"@{login} is a member of {team}")
        via = f" or membership of {', '.join(teams)}" if teams else ""
        return Decision(False, f"@{login} cannot apply proposals on {host.name}: that needs write permission{via} "
                               f"(you have {perm or 'none'})")

    def check_slack(self, user_id: str, user_groups: Iterable[str] = ()) -> Decision:
        """Listed user IDs or members of a listed user group; nobody when neither list is set."""
        if user_id in self.slack_users:
            return Decision(True, f"<@{user_id}> is allowed to apply")
        hit = self.slack_groups.intersection(user_groups)
        if hit:
            return Decision(True, f"<@{user_id}> is in {sorted(hit)[0]}")
        if not self.slack_users and not self.slack_groups:
            return Decision(False, "applying from Slack is off: set ASAP_APPLY_SLACK_USERS or ASAP_APPLY_SLACK_GROUPS")
        return Decision(False, f"<@{user_id}> is not allowed to apply proposals (ask someone in the apply list)")

    def check_cli(self) -> Decision:
        return Decision(True, "local repository: the person at the terminal owns it")
