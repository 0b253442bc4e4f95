"""The Slack app manifest asks for exactly the scopes and events the code uses, and points at the route."""

from __future__ import annotations

from pathlib import Path

import yaml

from integrations.slack.app import EVENTS_PATH

MANIFEST = Path(__file__).resolve().parents[1] / "integrations" / "slack" / "manifest.yaml"

# What the code calls or listens to, and the scope each needs (api.slack.com/methods, /events).
METHOD_SCOPES = {"chat.postMessage": "chat:write", "chat.update": "chat:write", "chat.postEphemeral": "chat:write",
                 "reactions.add": "reactions:write", "usergroups.users.list": "usergroups:read"}
EVENT_SCOPES = {"app_mention": "app_mentions:read", "message.im": "im:history",
                "message.channels": "channels:history", "message.groups": "groups:history"}


def test_scopes_are_exactly_what_the_code_needs() -> None:
    m = yaml.safe_load(MANIFEST.read_text())
    scopes = set(m["oauth_config"]["scopes"]["bot"])
    needed = set(METHOD_SCOPES.values()) | set(EVENT_SCOPES.values()) | {"commands"}
    assert scopes == needed
    assert set(m["settings"]["event_subscriptions"]["bot_events"]) == set(EVENT_SCOPES)


def test_every_url_is_the_one_route_and_the_command_is_asap() -> None:
    m = yaml.safe_load(MANIFEST.read_text())
    urls = [m["settings"]["event_subscriptions"]["request_url"], m["settings"]["interactivity"]["request_url"],
            *(c["url"] for c in m["features"]["slash_commands"])]
    assert all(u.endswith(EVENTS_PATH) for u in urls)
    assert [c["command"] for c in m["features"]["slash_commands"]] == ["/asap"]
    assert m["settings"]["interactivity"]["is_enabled"] is True
    assert m["settings"]["socket_mode_enabled"] is True
    assert m["features"]["app_home"]["messages_tab_enabled"] is True  # DMs need the messages tab


def test_the_code_calls_no_method_the_manifest_does_not_cover() -> None:
    import re

    src = "\n".join(p.read_text() for p in (MANIFEST.parent).glob("*.py"))
    called = {name.replace("_", ".", 1) for name in re.findall(r"(?:client|sure|clients\.progress)\.(\w+?)\(", src)}
    called = {c.replace("chat.post", "chat.post").replace("usergroups.users_list", "usergroups.users.list") for c in called}
    known = {"chat.postMessage", "chat.update", "chat.postEphemeral", "reactions.add", "usergroups.users.list",
             "conversations.replies", "conversations.history"}  # *:history scopes: finding a first post again
    assert {"chat.postMessage", "chat.update", "reactions.add"} <= called
    assert called <= known, called - known
