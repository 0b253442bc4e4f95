"""Who may apply: one set of variable names for every front end (bot.auth.ApplyPolicy.from_env), the old
Slack names as deprecated aliases that still work and warn once, and bad values named by their variable."""

from __future__ import annotations

import logging

import pytest

from bot import auth
from bot.auth import ApplyPolicy
from bot.errors import AsapError
from integrations.github.config import GitHubIntegration
from integrations.slack.settings import SlackSettings

SLACK = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "8f742231b10e8888abcd11122285a5ab"}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "_warned", set())  # "once per process": start each test as a new process


def deprecations(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "asap.auth" and "deprecated" in r.getMessage()]


def test_documented_names_drive_every_front_end(caplog: pytest.LogCaptureFixture) -> None:
    env = {"ASAP_APPLY_SLACK_USERS": "U012ABC, W0XYZ", "ASAP_APPLY_SLACK_GROUPS": "S0INFRA",
           "ASAP_APPLY_GITHUB_TEAMS": "acme/ml-infra,acme/sre"}
    with caplog.at_level(logging.WARNING, logger="asap.auth"):
        policy = ApplyPolicy.from_env(env)
        slack = SlackSettings.from_env({**SLACK, **env})
        gh = GitHubIntegration.from_env({"GITHUB_WEBHOOK_SECRET": "w", **env})
    assert policy.slack_users == {"U012ABC", "W0XYZ"} and policy.slack_groups == {"S0INFRA"}
    assert policy.github_teams == ("acme/ml-infra", "acme/sre")  # written order: the refusal lists them so
    assert slack.appliers == policy.slack_users and slack.applier_groups == policy.slack_groups
    assert slack.policy().check_slack("W0XYZ").allowed and not slack.policy().check_slack("U999").allowed
    assert slack.policy().check_slack("U999", ["S0INFRA"]).allowed
    assert gh.apply_teams == policy.github_teams
    assert deprecations(caplog) == []


def test_old_slack_names_still_work_and_warn_once(caplog: pytest.LogCaptureFixture) -> None:
    env = {"ASAP_SLACK_APPLIERS": "U1AA", "ASAP_SLACK_APPLIER_GROUP": "S1AA"}
    with caplog.at_level(logging.WARNING, logger="asap.auth"):
        first = SlackSettings.from_env({**SLACK, **env})
        again = ApplyPolicy.from_env(env)  # read again (another front end, a reload): no second warning
    assert first.appliers == {"U1AA"} and first.applier_groups == {"S1AA"}
    assert again.slack_users == {"U1AA"} and again.check_slack("U1AA").allowed
    warned = deprecations(caplog)
    assert len(warned) == 2
    assert any("ASAP_SLACK_APPLIERS" in w and "ASAP_APPLY_SLACK_USERS" in w for w in warned)
    assert any("ASAP_SLACK_APPLIER_GROUP" in w and "ASAP_APPLY_SLACK_GROUPS" in w for w in warned)


def test_old_and_new_names_together_are_merged() -> None:
    p = ApplyPolicy.from_env({"ASAP_SLACK_APPLIERS": "U1AA", "ASAP_APPLY_SLACK_USERS": "U2BB,U1AA",
                              "ASAP_SLACK_APPLIER_GROUP": "S1AA", "ASAP_APPLY_SLACK_GROUPS": "S2BB,S3CC"})
    assert p.slack_users == {"U1AA", "U2BB"} and p.slack_groups == {"S1AA", "S2BB", "S3CC"}


def test_nothing_set_means_slack_apply_is_off_and_names_the_variables(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="asap.auth"):
        p = ApplyPolicy.from_env({})
    d = p.check_slack("U012ABC")
    assert not d.allowed and "ASAP_APPLY_SLACK_USERS" in d.reason and "ASAP_APPLY_SLACK_GROUPS" in d.reason
    assert p.github_teams == () and deprecations(caplog) == []


@pytest.mark.parametrize("env, field", [
    ({"ASAP_APPLY_SLACK_USERS": "U012ABC,alice"}, "ASAP_APPLY_SLACK_USERS"),
    ({"ASAP_SLACK_APPLIERS": "@bob"}, "ASAP_SLACK_APPLIERS"),  # an alias's bad value names the alias
    ({"ASAP_APPLY_SLACK_GROUPS": "@infra"}, "ASAP_APPLY_SLACK_GROUPS"),
    ({"ASAP_SLACK_APPLIER_GROUP": "U012ABC"}, "ASAP_SLACK_APPLIER_GROUP"),
    ({"ASAP_APPLY_GITHUB_TEAMS": "ml-infra"}, "ASAP_APPLY_GITHUB_TEAMS"),
    ({"ASAP_APPLY_GITHUB_TEAMS": "acme/ml infra"}, "ASAP_APPLY_GITHUB_TEAMS"),
])
def test_bad_values_name_their_variable_in_every_front_end(env: dict[str, str], field: str) -> None:
    for read in (ApplyPolicy.from_env,
                 lambda e: SlackSettings.from_env({**SLACK, **e}),
                 lambda e: GitHubIntegration.from_env({"GITHUB_WEBHOOK_SECRET": "w", **e})):
        with pytest.raises(AsapError) as exc:
            read(env)
        assert exc.value.field == field
        assert repr(next(iter(env.values())).split(",")[-1].strip()) in exc.value.message
