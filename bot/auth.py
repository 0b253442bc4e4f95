"""Who may apply a proposal: one policy object for every front end (Atlantis-style: apply is gated).

* GitHub: people with ``write``, ``maintain`` or ``admin`` permission on the repository (asked through the
  API, never taken from the comment), or active members of a listed team (``org/slug``, from
  ``ASAP_APPLY_GITHUB_TEAMS`` and the default branch's ``.asap.yml``).
* Slack: user IDs in ``ASAP_APPLY_SLACK_USERS`` or members of a user group in ``ASAP_APPLY_SLACK_GROUPS``
  (the Slack front end looks the groups up and passes them in).
* CLI: the person at the terminal owns the local repository.

The variables are read in ONE place, :meth:`ApplyPolicy.from_env`, for every front end:

* ``ASAP_APPLY_SLACK_USERS``: comma-separated Slack member IDs (``U012ABCDEF``);
  deprecated alias ``ASAP_SLACK_APPLIERS``.
* ``ASAP_APPLY_SLACK_GROUPS``: comma-separated Slack user group IDs (``S0123ABCD``);
  deprecated alias ``ASAP_SLACK_APPLIER_GROUP``.
* ``ASAP_APPLY_GITHUB_TEAMS``: comma-separated GitHub teams (``org/team-slug``).

An alias still works (its values are merged with the documented name's) but logs a warning, once per
process, naming the variable to use instead. Every value is checked; a bad one raises
:class:`~bot.errors.AsapError` naming the variable it came from. Every decision carries the sentence to
show the person, so a refusal is never silent.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from bot.errors import AsapError

log = logging.getLogger("asap.auth")

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})

SLACK_USERS_VAR = "ASAP_APPLY_SLACK_USERS"
SLACK_GROUPS_VAR = "ASAP_APPLY_SLACK_GROUPS"
GITHUB_TEAMS_VAR = "ASAP_APPLY_GITHUB_TEAMS"
# old name -> the documented name it stands for; read, merged, and warned about once per process
DEPRECATED_ALIASES: dict[str, str] = {
    "ASAP_SLACK_APPLIERS": SLACK_USERS_VAR,
    "ASAP_SLACK_APPLIER_GROUP": SLACK_GROUPS_VAR,
}

SLACK_USER_RE = re.compile(r"^[UW][A-Z0-9]{2,20}$")
SLACK_GROUP_RE = re.compile(r"^S[A-Z0-9]{2,20}$")
GITHUB_TEAM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")

_warned: set[str] = set()


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


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _warn_deprecated(alias: str) -> None:
    if alias in _warned:
        return
    _warned.add(alias)
    log.warning("%s is deprecated: use %s (the old name still works for now; both are merged)",
                alias, DEPRECATED_ALIASES[alias])


def _read_list(env: Mapping[str, str], name: str, pattern: re.Pattern[str], hint: str) -> list[str]:
    """Values of ``name`` and of its deprecated aliases, each checked against ``pattern``, in order, no repeats."""
    out: list[str] = []
    for var in (name, *[a for a, canon in DEPRECATED_ALIASES.items() if canon == name]):
        items = _csv(env.get(var))
        if items and var != name:
            _warn_deprecated(var)
        for item in items:
            if not pattern.match(item):
                raise AsapError(f"{var}={item!r} is not {hint}", field=var)
            if item not in out:
                out.append(item)
    return out


@dataclass(frozen=True)
class ApplyPolicy:
    github_teams: tuple[str, ...] = ()
    slack_users: frozenset[str] = field(default_factory=frozenset)
    slack_groups: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApplyPolicy:
        """The policy from ``ASAP_APPLY_SLACK_USERS``, ``ASAP_APPLY_SLACK_GROUPS`` and ``ASAP_APPLY_GITHUB_TEAMS``
        (and the deprecated aliases, see the module docstring); GitHub teams keep their written order."""
        env = os.environ if env is None else env
        users = _read_list(env, SLACK_USERS_VAR, SLACK_USER_RE,
                           "a Slack member ID (comma-separated IDs like U012ABCDEF: profile > ... > Copy member ID)")
        groups = _read_list(env, SLACK_GROUPS_VAR, SLACK_GROUP_RE,
                            "a Slack user group ID (like S0123ABCD, not its @handle)")
        teams = _read_list(env, GITHUB_TEAMS_VAR, GITHUB_TEAM_RE, "a GitHub team written org/team-slug")
        return cls(github_teams=tuple(teams), slack_users=frozenset(users), slack_groups=frozenset(groups))

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
            return Decision(False, f"applying from Slack is off: set {SLACK_USERS_VAR} or {SLACK_GROUPS_VAR}")
        return Decision(False, f"<@{user_id}> is not allowed to apply proposals (ask someone in the apply list)")

    def check_cli(self) -> Decision:
        return Decision(True, "local repository: the person at the terminal owns it")
