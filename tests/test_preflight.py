"""Pre-flight runs: a config and a few measured numbers, no profile, answered by why/propose/review/ask.

Runs in tests/data/preflight are published configurations (sources in the README beside them)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
import yaml

from bot.analysis.analyze import analyze_run
from bot.analysis.kpis import model_flops_per_step
from bot.analysis.preflight import LABEL
from bot.cli import main
from bot.errors import AsapError
from bot.proposals.engine import propose
from bot.runs.store import LocalRunStore
from knowledge.hardware import get_chip

DATA = Path(__file__).resolve().parent / "data" / "preflight"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    shutil.copytree(DATA, root, ignore=shutil.ignore_patterns("README.md"))
    return root


def _edit(root: Path, rid: str, **update: object) -> None:
    path = root / rid / "run.yaml"
    rec = yaml.safe_load(path.read_text())
    rec.update(update)
    path.write_text(yaml.safe_dump(rec))


def _exit(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_why_answers_a_run_without_a_profile_with_the_labelled_prediction(runs: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    report = analyze_run(LocalRunStore(runs).get("llama3-8b-h100"))
    assert report.basis == "predicted" and report.diagnosis.summary.startswith(LABEL)
    # measured tokens/s -> step time: 128 x 8192 tokens / 115608 tokens/s
    assert report.kpis.step_time_source == "measured-tokens"
    assert report.kpis.step_time_ms == pytest.approx(1000 * 128 * 8192 / 115608, rel=1e-6)
    assert report.run.mesh_short == "fsdp=8" and report.run.num_chips == 8
    assert all(e.statement.startswith(LABEL) for e in report.diagnosis.evidence)
    assert report.diagnosis.confidence == 0.5 and any("calibrated" in r for r in report.diagnosis.confidence_reasons)
    assert _exit(["--runs-dir", str(runs), "why", "llama3-8b-h100"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "predicted — no profile" in out and "no usable profile data" not in out


def test_measured_mfu_calibrates_through_the_flop_count(runs: Path) -> None:
    _edit(runs, "llama3-8b-h100", measured={"mfu_percent": 40.0})
    run = LocalRunStore(runs).get("llama3-8b-h100")
    report = analyze_run(run)
    flops = model_flops_per_step(run.record).per_step
    expected = 1000 * flops / (0.40 * get_chip("h100").peak_bf16_flops * 8)  # type: ignore[operator]
    assert report.kpis.step_time_source == "measured-mfu"
    assert report.kpis.step_time_ms == pytest.approx(expected, rel=1e-6)
    ps = propose(run, report, knowledge=False)
    assert ps.calibration is not None and ps.baseline.predicted is not None
    assert ps.baseline.predicted.step_time_ms == pytest.approx(expected, rel=0.02)  # calibrated on it
    assert ps.proposals and all(p.predicted is not None for p in ps.proposals)


def test_nothing_measured_is_an_uncalibrated_prediction_with_a_wide_band(runs: Path) -> None:
    _edit(runs, "llama3-8b-h100", measured=None)
    run = LocalRunStore(runs).get("llama3-8b-h100")
    report = analyze_run(run)
    assert report.kpis.step_time_ms is None and report.diagnosis.confidence == 0.35
    ps = propose(run, report, knowledge=False)
    assert ps.calibration is None and ps.baseline.predicted.uncertainty >= 0.3  # type: ignore[union-attr]
    assert any("pre-flight: no step time measured" in n for n in ps.notes)
    assert not any("calibration failed" in n for n in ps.notes)
    assert ps.verdict != "near_optimal"  # nothing shows little headroom


def test_a_recorded_oom_is_a_fact_the_critic_uses(runs: Path) -> None:
    run = LocalRunStore(runs).get("llama2-70b-a100-oom")
    report = analyze_run(run)
    assert report.diagnosis.evidence[0].signal == "measured.oom"
    ps = propose(run, report, knowledge=False)
    assert ps.verdict == "current_fails" and "out of memory" in ps.summary
    failed = [c for c in ps.baseline.critic if not c.passed and c.hard]
    assert [c.name for c in failed][:1] in (["memory"], ["known_failure"])
    assert any("measured.oom" in c.reason for c in ps.baseline.critic if c.name == "known_failure")
    assert all(p.mesh_short != ps.baseline.mesh_short or p.settings_changes for p in ps.proposals)


def test_no_model_and_no_profile_is_a_clear_error_naming_what_to_add(runs: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    _edit(runs, "llama3-8b-h100", model=None)
    with pytest.raises(AsapError) as err:
        analyze_run(LocalRunStore(runs).get("llama3-8b-h100"))
    assert err.value.field == "model" and "no profile" in err.value.message
    assert _exit(["--runs-dir", str(runs), "propose", "llama3-8b-h100"]) == 2
    assert "model" in capsys.readouterr().err


def test_review_uses_the_measured_step_and_names_the_predicted_bottleneck(runs: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    new = tmp_path / "new.yml"
    new.write_text("ici_mesh: {fsdp: 4, tensor: 2}\n")
    assert _exit(["--runs-dir", str(runs), "review", str(runs / "llama3-8b-h100" / "mesh.yml"), str(new),
                  "--run", "llama3-8b-h100", "--json"]) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    assert out["bottleneck"] in ("compute", "hbm", "communication")
    assert out["old"]["predicted"]["step_time_ms"] == pytest.approx(1000 * 128 * 8192 / 115608, rel=0.02)
    assert not any("calibration" in s for s in out["skipped"])
    _exit(["--runs-dir", str(runs), "review", str(runs / "llama3-8b-h100" / "mesh.yml"), str(new),
           "--run", "llama3-8b-h100"])
    assert "None-bound" not in capsys.readouterr().out


def test_ask_shows_chips_mesh_and_the_predicted_diagnosis(runs: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from agents.backend import RealBackend
    from agents.conversation import Conversation
    from agents.models import build_model
    from bot.store.sqlite_store import SQLiteStore

    backend = RealBackend(runs_root=str(runs))
    conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=build_model({}), backend=backend)
    a = asyncio.run(conv.ask("why is run llama3-8b-h100 slow?", thread_id="t"))
    assert "8 x NVIDIA H100" in a.text and "mesh fsdp=8" in a.text
    assert "predicted — no profile" in a.text and "Proposals" in a.text


def test_slack_mention_answers_a_pre_flight_run(runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.doubles.slack_double import SlackRig, mention_body

    async def go() -> str:
        async with SlackRig(tmp_path, monkeypatch, extra_env={"ASAP_RUNS_DIR": str(runs)}) as rig:
            status, _ = await rig.post_event(mention_body("<@UASAPBOT> is run llama3-8b-h100 sensible?", event_id="Ev1"))
            assert status == 200
            await rig.idle()
            assert rig.double.violations == []
            msgs = [m for m in rig.double.thread("C0DATA", "1710000000.000100") if m.ts != "1710000000.000100"]
            return " ".join(str(m.blocks) + (m.text or "") for m in msgs)

    body = asyncio.run(go())
    assert "predicted — no profile" in body and "no usable profile data" not in body
    assert "fsdp=8" in body
    assert "Predicted (no profile, calibrated on the measurement): step" in body  # the cost model's own line


def test_github_mention_answers_a_pre_flight_run(runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.doubles.github_rest_double import GitHubRestDouble, WebhookHarness
    from tests.doubles.github_rest_double import example_comment_event as comment_event

    repo = "acme/llm"
    monkeypatch.setenv("ASAP_RUNS_DIR", str(runs))
    with GitHubRestDouble() as d:
        d.add_repo(repo, {"README.md": "hi\n"}, collaborators={"alice": "write"})
        d.commit(repo, "f", {"README.md": "x\n"}, parent_branch="main")
        d.open_pull(repo, "f")

        async def go() -> None:
            async with WebhookHarness(d, tmp_path, runs_dir=str(runs)) as h:
                status, _ = await h.deliver("issue_comment", comment_event(
                    repo, 1, "@asap why is run llama3-8b-h100 slow?", comment_id=1))
                assert status in (200, 202)
                await h.drain()

        asyncio.run(go())
        replies = [c["body"] for c in d.comments_on(repo, 1)]
    assert replies and "predicted — no profile" in replies[-1] and "no usable profile data" not in replies[-1]
    assert "Predicted (no profile, calibrated on the measurement): step" in replies[-1]


def test_ask_shows_chips_and_mesh_even_when_nothing_can_be_analysed(runs: Path, tmp_path: Path) -> None:
    from agents.backend import RealBackend
    from agents.conversation import Conversation
    from agents.models import build_model
    from bot.store.sqlite_store import SQLiteStore

    _edit(runs, "llama3-8b-h100", model=None)  # no profile and no model: nothing to analyse or predict
    conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=build_model({}),
                        backend=RealBackend(runs_root=str(runs)))
    a = asyncio.run(conv.ask("why is run llama3-8b-h100 slow?", thread_id="t"))
    assert "8 x h100" in a.text and "mesh fsdp=8" in a.text and "? x ?" not in a.text
    assert "Diagnosis: not available: no profile, and the model is unknown" in a.text


def test_an_fp8_run_is_not_near_optimal_on_an_mfu_taken_against_the_bf16_peak(runs: Path) -> None:
    # The published row is FP8: 744 model TFLOP/s per GPU is high against the bf16 peak, not against fp8's.
    run = LocalRunStore(runs).get("llama3-8b-h100")
    report = analyze_run(run)
    assert report.kpis.mfu_percent is not None and report.kpis.mfu_percent > 45  # vs the bf16 peak
    ps = propose(run, report, knowledge=False)
    assert ps.verdict != "near_optimal"


def test_a_measured_peak_alone_calibrates_memory_but_not_time(runs: Path) -> None:
    _edit(runs, "llama3-8b-h100", measured={"hbm_peak_bytes": 60e9})
    run = LocalRunStore(runs).get("llama3-8b-h100")
    ps = propose(run, analyze_run(run), knowledge=False)
    assert ps.calibration is not None and ps.calibration["time_measured"] is False
    assert ps.baseline.predicted is not None
    assert ps.baseline.predicted.memory_per_chip_bytes == pytest.approx(60e9, rel=0.01)  # memory on the peak
    assert ps.baseline.predicted.uncertainty >= 0.3  # time still uncalibrated
    assert any("memory calibrated on measured.hbm_peak_bytes" in n for n in ps.notes)


def test_an_oom_with_nothing_else_measured_lifts_the_memory_model_to_the_fact(runs: Path) -> None:
    _edit(runs, "llama3-8b-h100", measured={"oom": True})  # the model predicts it fits: the OOM is the fact
    run = LocalRunStore(runs).get("llama3-8b-h100")
    ps = propose(run, analyze_run(run), knowledge=False)
    assert ps.verdict == "current_fails"
    assert ps.baseline.predicted is not None and ps.baseline.predicted.memory_per_chip_bytes > 85e9
    assert any("lower bound" in n for n in ps.notes)


def test_a_run_without_a_profile_shows_the_predicted_step_in_place_of_empty_kpis(capsys) -> None:  # type: ignore[no-untyped-def]
    """Megatron-Bridge 26.08, Qwen3 235B-A22B on 256 GB200 (published at 7,280 tokens/s/GPU: an 18.0 s step). With
    nothing measured in run.yaml, every KPI is unknown; the answer shows the cost model's step, MFU, tokens/s and
    memory instead, labelled as a prediction, and its split is the evidence's."""
    case = "mbridge-26.08-gb200-qwen3-235b-a22b-256gpu-mxfp8"
    eval_dir = Path(__file__).resolve().parents[1] / "examples" / "eval"
    report = analyze_run(LocalRunStore(eval_dir).get(case))
    p = report.predicted
    assert p is not None and not p.calibrated and report.kpis.step_time_ms is None
    assert abs(p.step_time_ms / 18005.0 - 1.0) < 0.10
    assert p.step_time_low_ms < 18005.0 < p.step_time_high_ms
    tokens = 8192 * 4096
    assert p.tokens_per_second == pytest.approx(tokens / (p.step_time_ms / 1000.0), rel=1e-3)
    assert p.fits_memory and p.memory_per_chip_bytes < p.memory_capacity_bytes
    evidence = {e.signal: e.value for e in report.diagnosis.evidence}
    assert p.split_percent["compute"] == evidence["predicted.compute_percent"]
    assert p.split_percent["moe_overhead"] == evidence["predicted.moe_overhead_percent"]
    assert sum(p.split_percent.values()) == pytest.approx(100.0, abs=0.5)
    assert _exit(["--runs-dir", str(eval_dir), "why", case]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{LABEL}: the cost model's step, uncalibrated" in out and f"{p.step_time_ms:,.1f} ms" in out
    assert "KPIs: none measured" in out
    # the published recipe counts the embedding and the loss as pipeline layers: (94 + 2) / 8 stages / 3 chunks
    assert "refuses to start" not in out


def test_a_measured_run_keeps_its_measured_kpis_beside_the_prediction(runs: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    report = analyze_run(LocalRunStore(runs).get("llama3-8b-h100"))
    assert report.predicted is not None and report.predicted.calibrated
    assert _exit(["--runs-dir", str(runs), "why", "llama3-8b-h100"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "KPIs (measured)" in out and "the cost model's step, calibrated on the measurement" in out
