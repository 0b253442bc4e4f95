"""Apply and Explain buttons over the real HTTP path: who may apply, one PR per proposal however often it is
clicked, and button values that are checked against the thread they sit in."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from integrations.codehost.localgit import LocalGitHost
from tests.doubles.slack_double import SlackRig, action_body, mention_body

CH = "C0DATA"
ROOT = "1710000000.000100"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "runs"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository holding run 123's MaxText config (what Apply edits), on branch main."""
    path = tmp_path / "repo"
    path.mkdir()
    shutil.copy(EXAMPLES / "123" / "maxtext.yml", path / "maxtext.yml")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=path, check=True, env=env)
    return path


async def analysed(rig: SlackRig) -> Any:
    await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvApply"))
    await rig.idle()
    return next(m for m in rig.double.messages if m.thread_ts == ROOT)


def mesh_card(rig: SlackRig) -> tuple[int, int, str]:
    """(card number, engine rank, mesh) of the first card that changes only the mesh (what Apply edits)."""
    from agents.workspace import Workspace

    ws = Workspace.from_dict(rig.ctx.store.get_thread(f"slack:{CH}:{ROOT}")["workspace"])
    now = ws.report["run"]["mesh_short"]
    for i, p in enumerate(ws.proposal_list()[:3], 1):
        if p["mesh_short"] != now and not p.get("settings_changes"):
            return i, p["rank"], p["mesh_short"]
    raise AssertionError("no mesh-only proposal for run 123")


def settings_card(rig: SlackRig) -> tuple[int, dict[str, Any]]:
    """(card number, proposal) of the first card that changes settings on the same mesh (e.g. the remat policy)."""
    from agents.workspace import Workspace

    ws = Workspace.from_dict(rig.ctx.store.get_thread(f"slack:{CH}:{ROOT}")["workspace"])
    now = ws.report["run"]["mesh_short"]
    for i, p in enumerate(ws.proposal_list()[:3], 1):
        if p["mesh_short"] == now and p.get("settings"):
            return i, p
    raise AssertionError("no settings proposal for run 123")


def click(rig: SlackRig, answer: Any, action_id: str, *, user: str, action_ts: str, value: str | None = None) -> Any:
    button = next(e for b in answer.blocks if b["type"] == "actions" for e in b["elements"] if e["action_id"] == action_id)
    body = action_body(action_id, value if value is not None else button["value"], user=user, channel=CH,
                       message_ts=answer.ts, thread_ts=ROOT, action_ts=action_ts)
    return rig.click(body)


def branches(repo: Path) -> list[str]:
    out = subprocess.run(["git", "branch", "--format=%(refname:short)"], cwd=repo, capture_output=True, text=True, check=True)
    return sorted(out.stdout.split())


def test_allowed_person_applies_once_however_often_it_is_clicked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 repo: Path) -> None:
    host = LocalGitHost(repo)

    async def go() -> str:
        async with SlackRig(tmp_path, monkeypatch, appliers="UALICE,UCAROL", codehost=host) as rig:
            answer = await analysed(rig)
            n, rank, mesh = mesh_card(rig)
            branch = f"asap/123-p{rank}"
            results = await asyncio.gather(
                click(rig, answer, f"asap_apply:{n}", user="UALICE", action_ts="1710000001.000001"),
                click(rig, answer, f"asap_apply:{n}", user="UALICE", action_ts="1710000001.000002"))
            assert [s for s, _ in results] == [200, 200]
            await rig.idle()
            await click(rig, answer, f"asap_apply:{n}", user="UCAROL", action_ts="1710000002.000001")
            await rig.idle()
            pulls = host.open_pulls()
            assert len(pulls) == 1 and pulls[0].head_branch == branch
            assert mesh in pulls[0].title
            thread = [m for m in rig.double.thread(CH, ROOT) if m.ts != answer.ts]
            applied = [m for m in thread if branch in m.text or branch in str(m.blocks)]
            assert len(applied) == 1 and "opened" in applied[0].text
            later = [e for e in rig.double.ephemerals if "already applied" in e["text"]]
            assert len(later) == 2 and branch in later[-1]["text"]
            assert rig.double.violations == []
            return branch

    branch = run(go())
    assert branches(repo) == [branch, "main"]


def test_applying_a_settings_card_changes_only_its_settings_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   repo: Path) -> None:
    host = LocalGitHost(repo)
    before = (repo / "maxtext.yml").read_text()

    async def go() -> tuple[str, dict[str, Any]]:
        async with SlackRig(tmp_path, monkeypatch, appliers="UALICE", codehost=host) as rig:
            answer = await analysed(rig)
            n, p = settings_card(rig)
            await click(rig, answer, f"asap_apply:{n}", user="UALICE", action_ts="1710000001.000009")
            await rig.idle()
            branch = f"asap/123-p{p['rank']}"
            assert [x.head_branch for x in host.open_pulls()] == [branch]
            thread = [m for m in rig.double.thread(CH, ROOT) if m.ts != answer.ts]
            applied = [m for m in thread if branch in str(m.blocks)]
            assert len(applied) == 1 and p["settings_changes"][0] in applied[0].text  # says what changes
            assert rig.double.violations == []
            return branch, p

    branch, p = run(go())
    after = subprocess.run(["git", "show", f"{branch}:maxtext.yml"], cwd=repo, capture_output=True, text=True,
                           check=True).stdout
    keys = {str(k).rsplit(".", 1)[-1] for k in p["settings"]}
    changed = [(a, b) for a, b in zip(before.split("\n"), after.split("\n"), strict=True) if a != b]
    assert changed and all(a.split(":")[0] == b.split(":")[0] and a.split(":")[0] in keys for a, b in changed)


def test_person_not_allowed_gets_an_ephemeral_and_nothing_is_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    repo: Path) -> None:
    host = LocalGitHost(repo)

    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch, appliers="UCAROL", group="S0INFRA",
                            usergroups={"S0INFRA": ["UDAVE"]}, codehost=host) as rig:
            answer = await analysed(rig)
            n, rank, _ = mesh_card(rig)
            await click(rig, answer, f"asap_apply:{n}", user="UMALLORY", action_ts="1710000003.000001")
            await rig.idle()
            assert host.open_pulls() == []
            eph = rig.double.ephemerals
            assert len(eph) == 1 and eph[0]["user"] == "UMALLORY" and "Only" in eph[0]["text"]
            assert rig.double.called("usergroups.users.list") == [{"usergroup": "S0INFRA"}]
            # the refused click did not use up the proposal: a group member can still apply it
            await click(rig, answer, f"asap_apply:{n}", user="UDAVE", action_ts="1710000003.000002")
            await rig.idle()
            assert [p.head_branch for p in host.open_pulls()] == [f"asap/123-p{rank}"]

    run(go())


def test_nobody_configured_means_apply_is_off_and_says_how_to_turn_it_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                          repo: Path) -> None:
    host = LocalGitHost(repo)

    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch, codehost=host) as rig:
            answer = await analysed(rig)
            await click(rig, answer, "asap_apply:1", user="UALICE", action_ts="1710000004.000001")
            await rig.idle()
            assert host.open_pulls() == []
            assert "ASAP_APPLY_SLACK_USERS" in rig.double.ephemerals[0]["text"]

    run(go())


@pytest.mark.parametrize("value, why", [
    ('{"run":"204","i":1}', "thread is about run"),  # another run than the thread's
    ('{"run":"123","i":2}', "not ASAP"),  # index disagrees with the action id (asap_apply:1)
    ('{"run":"123","i":1,"config":"../../etc/passwd"}', "not ASAP"),  # extra keys
    ('not json', "not ASAP"),
])
def test_button_values_are_validated_against_the_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path,
                                                        value: str, why: str) -> None:
    host = LocalGitHost(repo)

    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch, appliers="UALICE", codehost=host) as rig:
            answer = await analysed(rig)
            status, _ = await click(rig, answer, "asap_apply:1", user="UALICE", action_ts="1710000005.000001", value=value)
            assert status == 200
            await rig.idle()
            assert host.open_pulls() == []
            if why == "thread is about run":
                assert why in rig.double.ephemerals[0]["text"]
            else:
                assert rig.double.ephemerals == []  # not ASAP's button: acknowledged and ignored

    run(go())


def test_explain_posts_the_numbers_behind_a_card_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch) as rig:
            answer = await analysed(rig)
            await click(rig, answer, "asap_explain:2", user="UBOB", action_ts="1710000006.000001")
            await click(rig, answer, "asap_explain:2", user="UBOB", action_ts="1710000006.000002")
            await rig.idle()
            extra = [m for m in rig.double.thread(CH, ROOT) if m.ts != answer.ts]
            assert len(extra) == 1
            body = str(extra[0].blocks)
            assert "Proposal 2 for run 123" in body and "Critic checks" in body and "Memory per chip" in body
            assert rig.double.violations == []

    run(go())


def run(coro: Any) -> Any:
    return asyncio.run(coro)
