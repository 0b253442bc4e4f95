"""Answers survive Slack's rate limits: the Web API double enforces Slack's per-method tiers with 429 +
Retry-After, and every mention of a burst is still answered exactly once, without recomputing anything."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from integrations.slack.pacing import Pacer, ProgressBudget, retry_after_s
from tests.doubles.slack_double import METHOD_LIMITS, SlackDouble, SlackRig, mention_body

CHANNELS = ["C0DATA", "C0INFRA", "C0TRAIN"]
RUNS = ["123", "204", "311", "415", "520", "618"]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def burst(n: int) -> list[dict[str, Any]]:
    return [mention_body(f"<@UASAPBOT> why is job {RUNS[i % len(RUNS)]} slow?", event_id=f"EvBurst{i}",
                         channel=CHANNELS[i % len(CHANNELS)], user=f"U{i:05d}", ts=f"1710000{i:03d}.000100")
            for i in range(n)]


def test_a_burst_under_slacks_tiers_is_answered_once_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """30 mentions at once; chat.update held to tier 2 (20 a window) so the final answers themselves get 429s."""
    limits = {**METHOD_LIMITS, "chat.update": ("tier", 2)}
    double = SlackDouble(rate_limits=True, time_scale=0.25, limits=limits)  # a "minute" lasts 15 s

    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch, double=double, concurrency=4) as rig:
            events = burst(30)
            statuses = await asyncio.gather(*(rig.post_event(e) for e in events))
            assert [s for s, _ in statuses] == [200] * 30
            await rig.idle(timeout=240)
            d = rig.double
            assert any(m == "chat.update" for m, _, _ in d.limited), "the burst never met a limit"
            for e in events:
                ev = e["event"]
                replies = [m for m in d.thread(ev["channel"], ev["ts"]) if m.ts != ev["ts"]]
                assert len(replies) == 1, (ev["ts"], [m.text for m in replies])
                body = json.dumps(replies[0].blocks)
                assert f"Run {ev['text'].split()[4]} is" in body and "Looking at run" not in body
                # computed once: a 429 on the post never re-ran the analysis
                log = rig.ctx.store.read_log(f"slack:{ev['channel']}:{ev['ts']}")
                assert [x["intent"] for x in log if x.get("kind") == "request"] == ["first"]
            assert len(d.called("chat.postMessage")) - sum(1 for m, _, _ in d.limited if m == "chat.postMessage") == 30
            assert d.violations == []
            clients = rig.ctx.extras["slack.clients"]
            assert clients.pacer.limited > 0 and clients.budget.skipped > 0  # progress gave way to answers

    run(go())


def test_a_failed_final_post_is_retried_without_recomputing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    double = SlackDouble(lose_response={"chat.update": 1})  # the first final update fails (server error)

    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch, double=double,
                            extra_env={"ASAP_SLACK_PROGRESS_PER_MIN": "0"}) as rig:
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvFinal"))
            await rig.idle()
            replies = [m for m in rig.double.thread("C0DATA", "1710000000.000100") if m.ts != "1710000000.000100"]
            assert len(replies) == 1 and "Run 123 is" in json.dumps(replies[0].blocks)
            assert len(rig.double.called("chat.update")) == 2  # the lost one, then the retry of the post alone
            log = rig.ctx.store.read_log("slack:C0DATA:1710000000.000100")
            assert [x["intent"] for x in log if x.get("kind") == "request"] == ["first"]

    run(go())


def test_progress_budget_closes_under_pressure_and_reopens() -> None:
    now = [1000.0]
    pacer = Pacer(clock=lambda: now[0])
    budget = ProgressBudget(pacer, per_min=60, burst=2, cooldown_s=10)
    assert budget.take("C1") and budget.take("C1") and not budget.take("C1")  # burst spent
    now[0] += 1.0
    assert budget.take("C1")  # one a second refills
    pacer.note("chat.update", "C1", 5)  # Slack asked chat.update to wait
    now[0] += 3.0
    assert not budget.take("C1")  # still backing off
    now[0] += 4.0
    assert not budget.take("C1")  # backoff over, but refused 7 s ago: stay quiet (cooldown)
    now[0] += 4.0
    assert budget.take("C1")
    assert pacer.wait_s("chat.update", "C2") == 0  # the finals are never held by the budget, only by Retry-After


def test_retry_after_is_read_per_method_and_channel() -> None:
    now = [0.0]
    pacer = Pacer(clock=lambda: now[0])
    assert retry_after_s({"Retry-After": ["7"]}) == 7 and retry_after_s({"retry-after": "x"}) == 1
    pacer.note("chat.postMessage", "C1", 3)
    assert pacer.wait_s("chat.postMessage", "C1") == 3 and pacer.wait_s("chat.postMessage", "C2") == 0
    pacer.note("chat.update", "C1", 4)  # tiered methods are limited per workspace: every channel waits
    assert pacer.wait_s("chat.update", "C9") == 4
