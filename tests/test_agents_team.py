"""The agent team end to end in analyst mode and with scripted models (ReplayChatCompletionClient)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from autogen_core import FunctionCall
from autogen_core.models import CreateResult, RequestUsage
from autogen_ext.models.replay import ReplayChatCompletionClient
from doubles.agents_backend import FakeBackend

from agents.conversation import Conversation
from agents.models import ModelSetup, build_model
from bot.errors import RunNotFound
from bot.store.sqlite_store import SQLiteStore


def ask(conv: Conversation, text: str, thread: str = "t1", **kw):
    return asyncio.run(conv.ask(text, thread_id=thread, **kw))


@pytest.fixture
def backend(tmp_path: Path) -> FakeBackend:
    return FakeBackend(tmp_path)


@pytest.fixture
def conv(tmp_path: Path, backend: FakeBackend) -> Conversation:
    return Conversation(store=SQLiteStore(tmp_path / "state.db"), model=build_model({}), backend=backend)


def test_first_answer_names_run_diagnosis_evidence_and_three_checked_proposals(conv: Conversation, backend: FakeBackend) -> None:
    a = ask(conv, "why is job 123 slow?")
    assert a.run_id == "123" and a.mode == "analyst" and a.intent == "first"
    assert "Run 123" in a.text
    assert "communication-bound (confidence 0.82)" in a.text
    assert "collectives take 41.5% of the step" in a.text
    assert "1. fsdp=32 tensor=2" in a.text and "2. fsdp=16 tensor=4" in a.text and "3. fsdp=64" in a.text
    # the Critic saw every candidate before the Coordinator answered
    critiqued = [c[1] for c in backend.calls if c[0] == "critique"]
    assert critiqued == ["fsdp=32 tensor=2", "fsdp=16 tensor=4", "fsdp=64"]
    assert a.usage["total_tokens"] == 0 and a.cost_usd == 0.0


def test_unknown_run_is_a_clear_error(conv: Conversation) -> None:
    with pytest.raises(RunNotFound, match="999"):
        ask(conv, "why is job 999 slow?")
    with pytest.raises(RunNotFound, match="no run ID"):
        ask(conv, "why is it slow?", thread="t2")


def test_followups_answer_from_the_computed_results(conv: Conversation, backend: FakeBackend) -> None:
    ask(conv, "why is job 123 slow?")
    first = ask(conv, "which one would you start with?")
    assert first.intent == "which_first"
    assert "Start with proposal 1: fsdp=32 tensor=2" in first.text and "confidence 0.70" in first.text

    sure = ask(conv, "are you sure?")
    assert "Confidence: moderate (0.70)" in sure.text
    assert "profile has per-op timings" in sure.text and "measured HBM peak" in sure.text

    push = ask(conv, "I think proposal 2 looks better")
    assert push.intent == "pushback"
    assert "I would still start with proposal 1, not 2" in push.text
    assert "predicted step time: proposal 2" in push.text  # defended with numbers, not agreement

    cmp_ = ask(conv, "compare 1 and 3")
    assert "Proposal 1 (fsdp=32 tensor=2) vs proposal 3 (fsdp=64)" in cmp_.text
    assert "step_time_ms" in cmp_.text

    exp = ask(conv, "explain HBM-bound")
    assert exp.text.startswith("hbm: HBM-bound means")
    assert "this run: diagnosed communication-bound; this is a secondary bottleneck" in exp.text

    what = ask(conv, "what if we had 512 chips")
    assert ("rank", 512) in backend.calls
    assert "With 512 chips" in what.text and "1. fsdp=512: predicted step 12.5 ms" in what.text

    other = ask(conv, "write a haiku about it")
    assert "Free-form questions need a model" in other.text


def test_pushback_is_decided_by_the_numbers(conv: Conversation, backend: FakeBackend) -> None:
    ask(conv, "why is job 123 slow?")
    a = ask(conv, "I'd rather go with proposal 3")
    # proposal 3 (fsdp=64) is predicted faster than 1 but far less certain: defended with both numbers
    assert a.intent == "pushback"
    assert "I would still start with proposal 1, not 3" in a.text
    assert "predicted step time: proposal 3 -19.4% vs proposal 1 -12.9%" in a.text
    assert "confidence: 0.40 vs 0.70" in a.text
    # when the standing recommendation is worse on the numbers, push-back for the better one revises it
    from agents.followups import weigh_pushback
    from agents.workspace import Workspace

    rec = conv.store.get_thread("t1")
    ws = Workspace.from_dict(rec["workspace"])
    ws.stance["recommended"] = 2
    out = weigh_pushback(ws, 1)
    assert out["verdict"] == "revise" and ws.stance["recommended"] == 1
    assert any("proposal 1 scores" in e and "revising" in e for e in out["evidence"]), out["evidence"]


def test_invented_mesh_is_checked_and_fixed_or_dropped(conv: Conversation) -> None:
    ask(conv, "why is job 123 slow?")
    fixed = ask(conv, "what about fsdp=4 tensor=8")  # 32 chips: the product check fails, FSDP scaled to fix it
    assert "fsdp=4 tensor=8" in fixed.text and "fixed to fsdp=8 tensor=8" in fixed.text
    dropped = ask(conv, "what about fsdp=4 tensor=16")
    assert "dropped" in dropped.text and "tensor > 8" in dropped.text


def test_thread_survives_a_restart(tmp_path: Path, backend: FakeBackend) -> None:
    path = tmp_path / "state.db"
    c1 = Conversation(store=SQLiteStore(path), model=build_model({}), backend=backend)
    ask(c1, "why is job 123 slow?", thread="slack:C1:1")
    c1.store.close()
    c2 = Conversation(store=SQLiteStore(path), model=build_model({}), backend=FakeBackend(tmp_path))
    a = ask(c2, "which one would you start with?", thread="slack:C1:1")
    assert a.run_id == "123" and "Start with proposal 1" in a.text
    rec = c2.store.get_thread("slack:C1:1")
    assert [t["intent"] for t in rec["turns"]] == ["first", "which_first"]
    assert rec["team_state"]["type"] == "TeamState"  # autogen's save_state, reloaded on the next request


def test_worklog_records_request_tools_replies_and_answer(conv: Conversation) -> None:
    ask(conv, "why is job 123 slow?")
    kinds = [e["kind"] for e in conv.log("t1")]
    assert kinds[0] == "request" and kinds[-1] == "answer"
    calls = [e for e in conv.log("t1") if e["kind"] == "tool_call"]
    assert [c["tool"] for c in calls] == ["analyze_run", "propose_meshes", "critique_candidates"]
    assert all(c["ms"] >= 0 and c["args"]["run_id"] == "123" and c["status"] == "ok" for c in calls)
    assert calls[0]["agent"] == "Analyzer" and calls[2]["agent"] == "Critic"
    assert any(e["kind"] == "model_reply" for e in conv.log("t1"))


def _fc(name: str, args: str) -> CreateResult:
    return CreateResult(finish_reason="function_calls", content=[FunctionCall(id=f"c-{name}", name=name, arguments=args)],
                        usage=RequestUsage(prompt_tokens=100, completion_tokens=10), cached=False)


def _txt(text: str) -> CreateResult:
    return CreateResult(finish_reason="stop", content=text, usage=RequestUsage(prompt_tokens=80, completion_tokens=20), cached=False)


INFO = {"vision": False, "function_calling": True, "json_output": False, "family": "unknown", "structured_output": False}


def replay(script: list) -> ReplayChatCompletionClient:
    return ReplayChatCompletionClient(script, model_info=INFO)


def _setup(client, **kw) -> ModelSetup:
    from agents.models import PriceSettings

    return ModelSetup(client=client, mode="compatible", model="scripted", token_budget=kw.get("budget", 100_000),
                      price=PriceSettings(input_per_mtok=1.0, output_per_mtok=2.0), timeout_s=5.0)


def test_scripted_model_corrects_an_invented_run_id_and_its_meshes_are_checked(tmp_path: Path, backend: FakeBackend) -> None:
    script = [
        _fc("analyze_run", '{"run_id": "999"}'),  # invented: refused as data, the model retries
        _fc("analyze_run", '{"run_id": "123"}'),
        _txt("Communication-bound."),
        _fc("propose_meshes", '{"run_id": "123"}'),
        _txt("Three candidates."),
        _fc("critique_candidates", '{"run_id": "123"}'),
        _txt("All pass."),
        _txt("Start with fsdp=32 tensor=2. You could also try tensor=32 fsdp=2."),  # second mesh is unchecked
    ]
    conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=_setup(replay(script)), backend=backend)
    a = ask(conv, "why is job 123 slow?")
    assert a.fallback is None and a.mode == "compatible"
    assert "this thread is about run '123', not '999'" in str([e for e in conv.log("t1") if e["kind"] == "tool_call"][0]["error"])
    assert "1. fsdp=32 tensor=2" in a.text
    assert "Start with fsdp=32 tensor=2." in a.text  # the model's explanation is kept ...
    assert "try tensor=32 fsdp=2" not in a.text  # ... its unchecked mesh removed, and the removal said
    assert "1 naming meshes not checked in this thread (tensor=32 fsdp=2)" in a.text
    assert a.usage == {"prompt_tokens": 720, "completion_tokens": 120, "total_tokens": 840, "model_calls": 8}
    assert a.cost_usd == pytest.approx((720 * 1.0 + 120 * 2.0) / 1e6)


def test_malformed_tool_calls_fall_back_to_the_analyst_answer(tmp_path: Path, backend: FakeBackend) -> None:
    script = [_fc("analyze_run", "{not json"), _fc("analyze_run", '{"wrong": 1}'), _fc("nonexistent_tool", "{}")] + [_txt("ok")] * 6
    conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=_setup(replay(script)), backend=backend)
    a = ask(conv, "why is job 123 slow?")
    assert a.fallback and "analyze_run" in a.fallback
    assert "this is the analyst answer" in a.text
    assert "communication-bound" in a.text and "1. fsdp=32 tensor=2" in a.text
    assert [e["kind"] for e in conv.log("t1")].count("fallback") == 1


def test_token_budget_stops_the_model_and_the_analyst_answers(tmp_path: Path, backend: FakeBackend) -> None:
    script = [_fc("analyze_run", '{"run_id": "123"}')] * 20
    conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=_setup(replay(script), budget=150),
                        backend=backend)
    a = ask(conv, "why is job 123 slow?")
    assert a.fallback and "over its budget of 150" in a.fallback
    assert a.usage["total_tokens"] >= 150 and "1. fsdp=32 tensor=2" in a.text


from test_store_memory import redis_url  # noqa: E402,F401,F811  (real Redis fixture: server on 6379 or a throwaway one)


def test_thread_survives_a_restart_on_redis(tmp_path: Path, backend: FakeBackend, redis_url: str) -> None:  # noqa: F811
    import uuid

    from bot.store.redis_store import RedisStore

    prefix = f"asap-test-{uuid.uuid4().hex[:8]}:"
    c1 = Conversation(store=RedisStore.from_url(redis_url, prefix=prefix), model=build_model({}), backend=backend)
    ask(c1, "why is job 123 slow?", thread="r1")
    c2 = Conversation(store=RedisStore.from_url(redis_url, prefix=prefix), model=build_model({}), backend=FakeBackend(tmp_path))
    a = ask(c2, "compare 1 and 2", thread="r1")
    assert "Proposal 1 (fsdp=32 tensor=2) vs proposal 2 (fsdp=16 tensor=4)" in a.text
    assert [e["kind"] for e in c2.log("r1")].count("answer") == 2
    for key in c2.store._r.scan_iter(match=f"{prefix}*"):
        c2.store._r.delete(key)


@pytest.mark.parametrize("text", [
    "I think the other two look more promising", "why not the others?", "I disagree", "I don't buy it",
    "what about the rest?",
])
def test_pushback_without_a_number_is_weighed_against_every_other_proposal(conv: Conversation, text: str) -> None:
    ask(conv, "why is job 123 slow?")
    a = ask(conv, text)
    assert a.intent == "pushback"
    assert "Free-form questions need a model" not in a.text  # answered in analyst mode, not a canned reply
    # proposals 2 and 3 are each weighed against proposal 1 with their numbers, and proposal 1 is defended
    assert "Weighing the others against proposal 1, on the numbers:" in a.text
    assert "proposal 2 (fsdp=16 tensor=4) vs proposal 1:" in a.text and "proposal 3 (fsdp=64) vs proposal 1:" in a.text
    assert "step time -19.4% vs -12.9%" in a.text and "confidence 0.40 vs 0.70" in a.text
    assert "none of the others scores higher than proposal 1: keeping it" in a.text


def test_pushback_without_a_number_revises_when_another_scores_higher(conv: Conversation) -> None:
    from agents.followups import weigh_pushback
    from agents.workspace import Workspace

    ask(conv, "why is job 123 slow?")
    ws = Workspace.from_dict(conv.store.get_thread("t1")["workspace"])
    ws.stance["recommended"] = 2  # a weaker standing recommendation: "the others" wins on the numbers
    out = weigh_pushback(ws, None)
    assert out["verdict"] == "revise" and ws.stance["recommended"] == 1
    assert "proposal 1 scores higher on the numbers: revising to it" in out["evidence"]
