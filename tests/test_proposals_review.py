"""``review`` and the CLI: a PR's config change is predicted and flagged; exit codes gate CI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLE_RUNS
from test_proposals_support import LLAMA_70B, make_report, make_run, maxtext_config

import bot.cli.proposals  # noqa: F401,E402  (registers propose/review/eval until bot.cli registers it)
from bot.cli import main
from bot.configs.mesh import Mesh
from bot.errors import AsapError
from bot.proposals.review import review


def _exit_code(argv: list[str]) -> int:
    """Run the CLI like a shell would and return its exit status."""
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _cfg(tmp_path: Path, name: str, ici: dict[str, int], dcn: dict[str, int] | None = None) -> Path:
    p = tmp_path / name
    p.write_text(maxtext_config(ici, dcn), encoding="utf-8")
    return p


def test_review_flags_an_out_of_memory_config(tmp_path: Path) -> None:
    run = make_run(tmp_path / "runs", chip="h100", num_chips=64, num_slices=8, model=LLAMA_70B,
                   ici={"tensor": 8}, dcn={"fsdp": 8}, training={"global_batch": 64, "seq_len": 4096, "remat": "full"})
    old = _cfg(tmp_path, "old.yml", {"tensor": 8}, {"fsdp": 8})
    new = _cfg(tmp_path, "new.yml", {"tensor": 8}, {"data": 8})  # 70B over 8 GPUs only: ~140 GB of state per GPU
    report = make_report(run, Mesh(ici={"tensor": 8}, dcn={"fsdp": 8}), "communication", collective_pct=40)
    res = review(old, new, run, report=report)
    assert not res.ok
    problems = [f for f in res.findings if f.severity == "problem"]
    assert any(f.check == "memory" and "out of memory" in f.message for f in problems)
    assert res.old.predicted is not None and res.new.predicted is not None
    assert res.new.predicted.memory_per_chip_bytes > res.old.predicted.memory_per_chip_bytes


def test_review_flags_a_non_dividing_config(tmp_path: Path) -> None:
    run = make_run(tmp_path / "runs", num_chips=64, ici={"fsdp": 64})
    old = _cfg(tmp_path, "old.yml", {"fsdp": 64})
    new = _cfg(tmp_path, "new.yml", {"tensor": 64})
    res = review(old, new, run, report=make_report(run, Mesh(ici={"fsdp": 64}), "compute"))
    assert not res.ok
    assert any(f.check == "divisibility" and f.severity == "problem" for f in res.findings)


def test_review_flags_a_non_multiplying_config_without_a_run(tmp_path: Path) -> None:
    old = _cfg(tmp_path, "old.yml", {"fsdp": 16, "tensor": 4})
    new = _cfg(tmp_path, "new.yml", {"fsdp": 16, "tensor": 8})
    res = review(old, new)
    assert not res.ok
    assert any(f.check == "product" and f.severity == "problem" for f in res.findings)
    assert any("need --run" in s for s in res.skipped)


def test_review_of_a_good_change_without_run_is_ok_and_says_what_was_skipped(tmp_path: Path) -> None:
    old = _cfg(tmp_path, "old.yml", {"fsdp": 16, "tensor": 4})
    new = _cfg(tmp_path, "new.yml", {"fsdp": 32, "tensor": 2})
    res = review(old, new)
    assert res.ok and res.mesh_changed
    assert res.new.predicted is None
    assert any("memory" in s for s in res.skipped)


def test_review_bad_input_is_an_asap_error(tmp_path: Path) -> None:
    old = _cfg(tmp_path, "old.yml", {"fsdp": 64})
    with pytest.raises(AsapError):
        review(old, tmp_path / "missing.yml")
    bad = tmp_path / "bad.yml"
    bad.write_text("ici_fsdp_parallelism: [\n")
    with pytest.raises(AsapError):
        review(old, bad)


def test_cli_review_exit_codes_gate_ci(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _cfg(tmp_path, "old.yml", {"fsdp": 16, "tensor": 4})
    good = _cfg(tmp_path, "good.yml", {"fsdp": 32, "tensor": 2})
    bad = _cfg(tmp_path, "bad.yml", {"fsdp": 16, "tensor": 8})
    assert _exit_code(["review", str(old), str(good), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["new"]["mesh"] == {"ici": {"fsdp": 32, "tensor": 2}, "dcn": {}}
    assert _exit_code(["review", str(old), str(bad)]) == 1
    assert "problem" in capsys.readouterr().out
    assert _exit_code(["review", str(old), str(tmp_path / "nope.yml")]) == 2
    assert "not found" in capsys.readouterr().err


def test_cli_propose_json_has_the_documented_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.proposals.engine import baseline_mesh

    runs = tmp_path / "runs"
    run = make_run(runs, num_chips=64, ici={"fsdp": 8, "tensor": 8}, step_ms=3000)
    base, _ = baseline_mesh(run, None)
    report = make_report(run, base, "communication", step_ms=3000, collective_pct=45)
    monkeypatch.setattr("bot.analysis.analyze.analyze_run", lambda _run: report)
    assert _exit_code(["--runs-dir", str(runs), "propose", "r1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["proposals"]
    for p in out["proposals"]:
        assert set(p["mesh"]) == {"ici", "dcn"}
        assert isinstance(p["predicted"]["step_time_ms"], float)
        assert isinstance(p["predicted"]["memory_per_chip_bytes"], float)
        assert 0 <= p["confidence"] <= 1 and p["rationale"]
        assert {"name", "passed", "reason"} <= set(p["critic"][0])
    assert out["verdict"] in {"improve", "near_optimal", "mesh_not_the_problem", "no_valid_proposals"}


def test_review_warns_on_a_move_against_the_diagnosis(tmp_path: Path) -> None:
    run = make_run(tmp_path / "runs", num_chips=64, ici={"fsdp": 32, "tensor": 2})
    old = _cfg(tmp_path, "old.yml", {"fsdp": 32, "tensor": 2})
    new = _cfg(tmp_path, "new.yml", {"fsdp": 8, "tensor": 8})
    report = make_report(run, Mesh(ici={"fsdp": 32, "tensor": 2}), "communication", collective_pct=45)
    res = review(old, new, run, report=report)
    assert res.ok  # a rule of thumb is a warning weighed against the prediction, not a failed review
    warn = [f for f in res.findings if f.check == "diagnosis" and f.severity == "warning"]
    assert warn and "model-parallel degree (tensor x sequence) 2->8" in warn[0].message
    assert "weighed against the prediction" in warn[0].message


def test_eval_runs_on_the_bundled_cases_and_prints_rates(repo_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.proposals.evaluate import run_eval

    report = run_eval(repo_root / "examples" / "eval")
    assert len(report.cases) >= 8
    assert not [c.error for c in report.cases if c.error]
    assert {c.kind for c in report.cases} == {"profiled", "config_only"}
    assert report.failing_check_rate == 0.0  # no proposal ever fails its own Critic
    assert report.top3_rate is not None and report.step_time_error_mean is not None
    assert all(c.source.strip() for c in report.cases)
    assert _exit_code(["eval", str(repo_root / "examples" / "eval")]) == 0
    out = capsys.readouterr().out
    assert "top-1" in out and "top-3" in out and "failing a check" in out


def test_eval_refuses_a_folder_without_cases(tmp_path: Path) -> None:
    from bot.proposals.evaluate import run_eval

    with pytest.raises(AsapError, match="no case folders"):
        run_eval(tmp_path)
    assert _exit_code(["eval", str(tmp_path / "missing")]) == 2


def test_review_gates_on_what_the_change_introduces_not_on_pre_existing_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Run 311's config already has tensor=16 with 40 heads (a divisibility failure). A PR that only changes
    # the learning rate must not fail the review for it; one that adds a new problem must.
    text = (EXAMPLE_RUNS / "311" / "maxtext.yml").read_text()
    old = tmp_path / "old.yml"
    old.write_text(text)
    lr = tmp_path / "lr.yml"
    lr.write_text(text + "learning_rate: 3.0e-4\n")
    assert _exit_code(["review", str(old), str(lr), "--run", "311", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    pre = [f for f in out["findings"] if f["severity"] == "pre-existing"]
    assert out["ok"] is True and [f["check"] for f in pre] == ["divisibility"]
    assert "heads=40" in pre[0]["message"] and "already so before this change" in pre[0]["message"]
    assert not [f for f in out["findings"] if f["severity"] == "problem"]
    assert _exit_code(["review", str(old), str(lr), "--run", "311"]) == 0
    assert "OK: no problems introduced by this change (1 pre-existing problem(s)" in " ".join(capsys.readouterr().out.split())
    # A change that introduces a problem the old config did not have still fails (exit 1).
    worse = tmp_path / "worse.yml"
    worse.write_text(text.replace("ici_fsdp_parallelism: 16", "ici_fsdp_parallelism: 8"))
    assert _exit_code(["review", str(old), str(worse), "--run", "311", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert any(f["severity"] == "problem" and f["check"] == "product" for f in out["findings"])
