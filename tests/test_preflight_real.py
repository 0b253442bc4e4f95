"""Pre-flight runs on real launch scripts (tests/data/real): what a user trips over first.

The Megatron-LM GPT-3 175B example states ``--global-batch-size 1536`` and ``--seq-length 2048`` but a
user's run.yaml often has no ``training:`` section; the KPIs must then use the config's numbers (and say
so), as the cost model does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from bot.analysis.analyze import analyze_run
from bot.cli import main
from bot.errors import AsapError
from bot.proposals.engine import propose
from bot.runs.store import LocalRunStore
from knowledge.hardware import get_chip

REAL = Path(__file__).resolve().parent / "data" / "real"
SCRIPT = "train_gpt3_175b_distributed.sh"
GPT3 = {"name": "gpt3-175b", "layers": 96, "d_model": 12288, "heads": 96, "d_ff": 49152, "mlp_matrices": 2}


def _run(tmp_path: Path, *, nodes: int = 16, chips: int = 128, slices: int = 16, **extra: object) -> Path:
    """A run folder holding the real script (NUM_NODES set to ``nodes``) and a run.yaml without training."""
    root = tmp_path / "runs"
    folder = root / "gpt3"
    folder.mkdir(parents=True)
    text = (REAL / "megatron" / SCRIPT).read_text()
    assert "NUM_NODES=1\n" in text
    (folder / SCRIPT).write_text(text.replace("NUM_NODES=1\n", f"NUM_NODES={nodes}\n"))
    record = {"id": "gpt3", "chip": "h100", "num_chips": chips, "num_slices": slices, "config": SCRIPT,
              "model": GPT3, "measured": {"step_time_ms": 60000.0}, **extra}
    (folder / "run.yaml").write_text(yaml.safe_dump(record))
    return root


def _flops_per_step() -> float:
    n = 96 * (4 * 12288**2 + 2 * 12288 * 49152)  # attention + plain MLP weights (no embeddings: vocab unset)
    tokens = 1536 * 2048
    return 6.0 * n * tokens + 12.0 * 96 * 2048 * 96 * 128 * tokens


def test_kpis_use_the_configs_batch_and_sequence_when_run_yaml_has_no_training(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    root = _run(tmp_path)
    run = LocalRunStore(root).get("gpt3")
    report = analyze_run(run)
    k = report.kpis
    expected = 100.0 * _flops_per_step() / (60.0 * 128 * get_chip("h100").peak_bf16_flops)
    assert k.mfu_percent == pytest.approx(expected, rel=0.01)
    assert k.tokens_per_second == pytest.approx(1536 * 2048 / 60.0, rel=1e-6)
    assert k.achieved_tflops_per_chip is not None and k.achieved_tflops_per_chip > 100
    assert k.shape_source == f"config {SCRIPT}"
    assert any("global batch 1536 and sequence length 2048" in w and SCRIPT in w for w in report.warnings)
    assert run.record.training is None  # the stored record is not changed by reading it

    assert main(["--runs-dir", str(root), "why", "gpt3"]) in (0, None)
    out = " ".join(capsys.readouterr().out.split())
    assert f"MFU │ {k.mfu_percent:.1f}%" in out and "(batch x seq from config)" in out
    # propose's verdict sees the same MFU (it rests on the report)
    ps = propose(run, report, knowledge=False)
    assert ps.proposals


def test_run_yaml_training_still_wins_over_the_config(tmp_path: Path) -> None:
    root = _run(tmp_path, training={"global_batch": 768, "seq_len": 2048})
    report = analyze_run(LocalRunStore(root).get("gpt3"))
    assert report.kpis.tokens_per_second == pytest.approx(768 * 2048 / 60.0, rel=1e-6)
    assert report.kpis.shape_source == "run.yaml"
    assert not any("the config" in w and "states; run.yaml" in w for w in report.warnings)


def test_partial_training_section_is_completed_from_the_config(tmp_path: Path) -> None:
    root = _run(tmp_path, training={"seq_len": 2048})
    report = analyze_run(LocalRunStore(root).get("gpt3"))
    assert report.kpis.tokens_per_second == pytest.approx(1536 * 2048 / 60.0, rel=1e-6)
    assert report.kpis.shape_source == f"run.yaml + config {SCRIPT}"
    assert any("does not state training.global_batch" in w for w in report.warnings)


def test_analyst_answer_shows_the_mfu_and_where_its_batch_came_from(tmp_path: Path) -> None:
    from agents.render import render_first
    from agents.workspace import Workspace

    root = _run(tmp_path)
    report = analyze_run(LocalRunStore(root).get("gpt3"))
    ws = Workspace(run_id="gpt3")
    ws.report = report.model_dump(mode="json")
    text = render_first(ws)
    assert f"MFU {report.kpis.mfu_percent:.1f}%" in text and f"from config {SCRIPT}" in text


def test_preflight_refusal_says_why_the_config_cannot_be_used(tmp_path: Path) -> None:
    # The script as published: NUM_NODES=1 (8 GPUs) with TP 8 x PP 16 = 128 GPUs per replica.
    root = _run(tmp_path, nodes=1, chips=8, slices=1)
    with pytest.raises(AsapError) as err:
        analyze_run(LocalRunStore(root).get("gpt3"))
    msg = err.value.render()
    assert "no readable sharding config" not in msg
    assert "128 GPUs per model replica" in msg and "world size 8" in msg


def test_megatron_launch_without_recompute_flags_is_costed_and_changed_in_megatron_terms(tmp_path: Path) -> None:
    """No --recompute-* flag in a launch means Megatron's default (no recompute), not MaxText's 'full';
    and no proposal may write a MaxText remat policy name into --recompute-granularity."""
    root = _run(tmp_path)
    run = LocalRunStore(root).get("gpt3")
    report = analyze_run(run)
    ps = propose(run, report, knowledge=False)
    assert ps.baseline.predicted is not None
    assumptions = " ".join(ps.baseline.predicted.assumptions)
    assert "assumed 'full'" not in assumptions
    assert "no --recompute-granularity / --recompute-activations in the launch: Megatron-LM's default" in assumptions
    for p in ps.proposals:
        diff = p.diff or ""
        for name in ("save_qkv_proj", "save_dot_except_mlp", "minimal", "save_out_proj"):
            assert f"--recompute-granularity {name}" not in diff


def _maxtext_175b(tmp_path: Path):  # type: ignore[no-untyped-def]
    folder = tmp_path / "runs" / "mt175"
    shutil.copytree(REAL / "maxtext" / "current" / "src", folder / "src")
    script = "src/maxtext/configs/tpu/v5p/gpt3_175b/gpt3_175b_base.sh"
    record = {"id": "mt175", "chip": "v5p", "num_chips": 512, "config": script,
              "command": f"bash {script} 4 full 1 64 8 myrun gs://bucket",
              "model": {**GPT3, "vocab": 50304}, "measured": {"step_time_ms": 40000.0}}
    (folder / "run.yaml").write_text(yaml.safe_dump(record))
    return LocalRunStore(tmp_path / "runs").get("mt175")


def test_maxtext_recipe_with_run_yaml_command_is_costed_with_the_commands_settings(tmp_path: Path) -> None:
    """MaxText's v5p GPT-3 175B recipe takes its batch and parallelism as positional arguments
    (``gpt3_175b_base.sh 4 full 1 64 8``): run.yaml ``command:`` supplies them, and the cost model and KPIs
    must read the same resolved launch the mesh is read from."""
    report = analyze_run(_maxtext_175b(tmp_path))
    assert report.run.mesh_short == "fsdp=64 tensor=8"
    # per_device_batch_size 4 x 512 chips, max_target_length 2048 (base.yml)
    assert report.kpis.tokens_per_second == pytest.approx(4 * 512 * 2048 / 40.0, rel=1e-6)
    assert report.kpis.mfu_percent is not None
    assert any("per-device batch 4 x 512 chips)" in w for w in report.warnings)


def _nemo20(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "nemo20"
    folder.mkdir(parents=True)
    shutil.copy(REAL / "nemo" / "launcher_gpt3_20b.yaml", folder)
    record = {"id": "nemo20", "chip": "h100", "num_chips": 512, "num_slices": 64, "config": "launcher_gpt3_20b.yaml",
              "model": {"layers": 44, "d_model": 6144, "heads": 48, "d_ff": 24576, "mlp_matrices": 2},
              "measured": {"step_time_ms": 4000.0}}
    (folder / "run.yaml").write_text(yaml.safe_dump(record))
    return tmp_path / "runs"


def test_nemo_yaml_with_framework_unstated_is_costed_as_megatron(tmp_path: Path) -> None:
    """NeMo's GPT-3 20B launcher config states bf16 O2 and the distributed optimizer (mcore_distributed_optim):
    with run.yaml's framework left at "other" it must still be costed as Megatron (bf16 weights, optimizer
    state sharded over 256 data ranks), not as fp32 JAX with an unsharded optimizer — which called NVIDIA's
    published configuration out of memory at 178 GB per chip."""
    run = LocalRunStore(_nemo20(tmp_path)).get("nemo20")
    report = analyze_run(run)
    ps = propose(run, report, knowledge=False)
    pred = ps.baseline.predicted
    assert pred is not None
    params = 44 * (4 * 6144**2 + 2 * 6144 * 24576)
    mem = pred.memory_breakdown_bytes
    assert mem["weights"] == pytest.approx(2.0 * params / 2, rel=0.02)  # bf16, split over tensor=2
    assert mem["optimizer"] < 0.02 * mem["weights"] * 6  # 12 B/param over 256 data ranks, not 8 B/param whole
    assert pred.memory_per_chip_bytes is not None and pred.memory_per_chip_bytes < 100e9


def test_review_names_the_whole_pipeline_degree_when_only_its_ici_part_moved(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Going from --pipeline-model-parallel-size 16 to 32 on 16 nodes is "pipeline 1->2" inside a node; the
    review must also say 16->32, the number the user changed."""
    root = _run(tmp_path)
    old = (root / "gpt3" / SCRIPT).read_text()
    new = old.replace("--tensor-model-parallel-size 8", "--tensor-model-parallel-size 4").replace(
        "--pipeline-model-parallel-size 16", "--pipeline-model-parallel-size 32")
    (tmp_path / "old.sh").write_text(old)
    (tmp_path / "new.sh").write_text(new)
    code = main(["--runs-dir", str(root), "review", str(tmp_path / "old.sh"), str(tmp_path / "new.sh"), "--run", "gpt3"])
    assert code in (0, None)
    out = " ".join(capsys.readouterr().out.split())
    assert "tensor 8->4, pipeline 1->2 (16->32 in all)" in out


def test_analyst_answer_signs_a_slower_proposals_change(tmp_path: Path) -> None:
    """A proposal predicted slower must read "+x% vs now", never a bare "x% vs now" beside "-y%" ones."""
    from agents.render import render_proposals
    from agents.workspace import Workspace

    ws = Workspace(run_id="r")
    ws.proposals = {"verdict": "uncertain", "summary": "", "proposals": [
        {"mesh_short": "data=8", "predicted": {"step_time_ms": 1166.5}, "change": {"step_time_percent": -2.8}},
        {"mesh_short": "data=4 sequence=2", "predicted": {"step_time_ms": 1325.9}, "change": {"step_time_percent": 10.5}},
    ]}
    text = render_proposals(ws)
    assert "(-2.8% vs now)" in text and "(+10.5% vs now)" in text


def test_confidence_never_calls_memory_over_the_usable_figure_merely_tight(tmp_path: Path) -> None:
    """A lighter remat on MaxText's v5p GPT-3 recipe passes the memory check on the band's low edge while the
    central estimate is over usable memory: the confidence reason must say that, not "tight memory, 88.6 GB
    of 86.4 GB usable"."""
    import re

    run = _maxtext_175b(tmp_path)
    ps = propose(run, analyze_run(run), knowledge=False)
    reasons = [r for p in ps.proposals for r in p.confidence_reasons if "usable" in r]
    assert reasons, "expected a proposal near the memory limit on this recipe"
    for r in reasons:
        m = re.search(r"tight memory, ([\d.]+) GB of ([\d.]+) GB usable", r)
        assert m is None or float(m.group(1)) <= float(m.group(2)), r
    assert any("over usable memory at the central estimate" in r and "low edge" in r for r in reasons)


def _nemo_llama(tmp_path: Path, measured: dict[str, float]) -> Path:
    """Megatron-LM's NeMo 2 Llama-3 functional test (dotted keys, CP 2) with an unnamed model in run.yaml."""
    folder = tmp_path / "runs" / "llama"
    folder.mkdir(parents=True)
    name = "llama3-nemo_8b_cp2.model_config.yaml"
    shutil.copy(REAL / "nemo" / name, folder)
    record = {"id": "llama", "chip": "a100", "num_chips": 8, "config": name,
              "model": {"layers": 12, "d_model": 768, "heads": 16, "d_ff": 3072}, "measured": measured}
    (folder / "run.yaml").write_text(yaml.safe_dump(record))
    return tmp_path / "runs"


def test_mfu_given_in_run_yaml_is_shown_as_measured_not_computed(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The step time is derived from measured.mfu_percent; the MFU shown back is that measurement."""
    root = _nemo_llama(tmp_path, {"mfu_percent": 20.0})
    report = analyze_run(LocalRunStore(root).get("llama"))
    assert report.kpis.step_time_source == "measured-mfu"
    assert report.kpis.mfu_percent == pytest.approx(20.0) and report.kpis.mfu_source == "measured"
    assert main(["--runs-dir", str(root), "why", "llama"]) in (0, None)
    out = " ".join(capsys.readouterr().out.split())
    assert "20.0% (measured)" in out
    # an unnamed model reads "model of N params", not "model  (N params)"
    assert "model of 113.2M params" in out and "model (" not in out


def test_measured_tokens_per_second_is_labelled_measured(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    root = _nemo_llama(tmp_path, {"tokens_per_second": 500000.0})
    assert main(["--runs-dir", str(root), "why", "llama"]) in (0, None)
    out = " ".join(capsys.readouterr().out.split())
    assert "500,000 (measured)" in out and "500,000 (batch x seq from config)" not in out


def test_review_of_a_batch_change_calls_the_per_token_change_noise_not_the_doubled_step(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Doubling NeMo's global_batch_size doubles the step; only the per-token change can be "within noise"."""
    root = _nemo20(tmp_path)
    old = root / "nemo20" / "launcher_gpt3_20b.yaml"
    new = tmp_path / "new.yaml"
    text = old.read_text()
    assert "  global_batch_size: 2048\n" in text
    new.write_text(text.replace("  global_batch_size: 2048\n", "  global_batch_size: 4096\n"))
    assert main(["--runs-dir", str(root), "review", str(old), str(new), "--run", "nemo20"]) in (0, None)
    out = " ".join(capsys.readouterr().out.split())
    assert "per token" in out
    import re

    for m in re.finditer(r"predicted change ([+-][\d.]+)%( per token)? .{0,40}?is within the model's noise \(\+-(\d+)%\)", out):
        assert abs(float(m.group(1))) <= float(m.group(3)), m.group(0)


def test_chat_what_if_more_chips_uses_the_configs_batch_when_run_yaml_has_none(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """"what if we had 256 chips" on a pre-flight run whose batch only the config states answered "run does not
    give training (global_batch, seq_len)" although `why` and `propose` used the config's."""
    from click.testing import CliRunner

    import bot.cli.agents  # noqa: F401  (registers chat)
    from bot.cli import cli

    for key in ("OPENAI_API_KEY", "ASAP_MODEL_BASE_URL", "REDIS_URL", "ASAP_MODEL", "ASAP_RUNS_DIR"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ASAP_MODEL_CONFIG", str(tmp_path / "none.yaml"))
    (tmp_path / "none.yaml").write_text("{}\n")
    root = _run(tmp_path)
    res = CliRunner().invoke(cli, ["--runs-dir", str(root), "chat", "gpt3", "--quiet"], input="what if we had 256 chips\n")
    assert res.exit_code == 0, res.output
    assert "With 256 chips" in res.output and "does not give training" not in res.output


def test_verdict_does_not_call_a_slower_alternative_the_fastest_predicted(tmp_path: Path) -> None:
    """NeMo's GPT-3 5B launcher config on 128 H100s: every alternative is predicted slower, yet the band is
    wide; the one worth measuring is named as slower than now, not as "the fastest predicted"."""
    folder = tmp_path / "runs" / "nemo5"
    folder.mkdir(parents=True)
    shutil.copy(REAL / "nemo" / "gpt3_5b.yaml", folder)
    record = {"id": "nemo5", "chip": "h100", "num_chips": 128, "num_slices": 16, "config": "gpt3_5b.yaml",
              "model": {"layers": 24, "d_model": 4096, "heads": 32, "d_ff": 16384, "mlp_matrices": 2},
              "measured": {"tokens_per_second": 1500000.0}}
    (folder / "run.yaml").write_text(yaml.safe_dump(record))
    run = LocalRunStore(tmp_path / "runs").get("nemo5")
    ps = propose(run, analyze_run(run), knowledge=False)
    assert all((p.change.step_time_percent or 0) > 0 for p in ps.proposals)  # the situation this test is about
    assert ps.verdict == "uncertain" and "Worth measuring first" in ps.summary
    assert "the fastest predicted" not in ps.summary and "slower than now" in ps.summary
