"""Turning on tensor-parallel communication overlap is proposed where the framework has it and it is off.

Real configs (tests/data/real/README.md): Megatron-LM's ``examples/gpt3/train_gpt3_175b_distributed.sh`` (TP 8, PP 16,
no sequence parallelism, no ``--tp-comm-overlap``) and torchtitan's ``llama3_70b.toml`` of spring 2025 (TP 8, compile
off), of February 2026 (``[compile] enable``) and ``llama3_405b.toml`` of 2024. Published evidence: torchtitan's
June 2025 async TP table (eval cases ``torchtitan-asynctp-*``; pytorch/torchtitan @ b5bcd76c,
``benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md``): Llama 3 70B bf16 on 256 H100, 597.3 tokens/s per GPU with
vanilla TP and 652.4 with async TP (1.09x).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.analysis.analyze import analyze_run
from bot.configs.detect import load_config, load_run_config, parse_config
from bot.configs.edit import apply_settings
from bot.configs.mesh import Mesh
from bot.proposals.engine import baseline_mesh, propose
from bot.proposals.moves import SettingsMove
from bot.proposals.settings import apply, expand
from bot.runs.record import RunRecord
from bot.runs.store import LocalRunStore
from knowledge import costmodel
from knowledge.cost_settings import settings_for_run, settings_from_config

REAL = Path(__file__).parent / "data" / "real"
GPT175 = REAL / "megatron" / "train_gpt3_175b_distributed.sh"
TITAN = REAL / "torchtitan"
EVAL = Path(__file__).resolve().parents[1] / "examples" / "eval"
MOVE = SettingsMove(change="tp_overlap", direction="enable")


def _changes(cfg, settings, framework: str = "other"):  # type: ignore[no-untyped-def]
    return expand(MOVE, settings=settings, config=cfg, framework=framework, runyaml_remat=None,
                  runyaml_micro_batch=None, global_batch=None, data_parallel=1)


def test_megatron_launch_gets_tp_comm_overlap_with_the_sequence_parallelism_it_requires() -> None:
    cfg = load_config(GPT175)
    settings = settings_from_config(cfg)
    assert settings.tp_comm_overlap is None and not settings.sequence_parallel
    [change] = _changes(cfg, settings, "megatron")
    assert change.kind == "tp-overlap" and change.needs_axis == "tensor"
    assert change.config_values == {"tp_comm_overlap": True, "sequence_parallel": True}
    assert "requires sequence parallelism" in change.words[0]
    # the launch carries both flags and reads back as overlapped (what the Critic re-checks)
    edited = parse_config(apply_settings(cfg, change.config_values), GPT175.name)
    assert "--tp-comm-overlap" in edited.text and "--sequence-parallel" in edited.text
    again = settings_from_config(edited)
    assert again.tp_comm_overlap is True and again.sequence_parallel is True


def test_overlap_takes_the_tp_collectives_off_the_critical_path_and_nothing_else() -> None:
    cfg = load_config(GPT175)
    settings = settings_from_config(cfg)
    [change] = _changes(cfg, settings, "megatron")
    record = RunRecord(id="g", chip="h100", num_chips=128, num_slices=16, config=GPT175.name, framework="megatron")
    mesh = Mesh(ici={"tensor": 8}, dcn={"pipeline": 16})
    before = costmodel.predict(record, mesh, settings=settings)
    # sequence parallelism alone (the part of the change that is not overlap) against both together
    sp_only = costmodel.predict(record, mesh, settings=settings.model_copy(update={"sequence_parallel": True}))
    after = costmodel.predict(record, mesh, settings=apply(settings, change, framework="megatron"))
    assert before.breakdown_ms["comm.tensor"] > 0.05 * before.step_time_ms  # TP 8 over 96 layers: exposed today
    # the overlap hides most of the TP collectives (what compute can cover) and changes no other term
    hidden = sp_only.breakdown_ms["comm.tensor"] - after.breakdown_ms["comm.tensor"]
    assert hidden > 0.5 * sp_only.breakdown_ms["comm.tensor"]
    assert after.step_time_ms < sp_only.step_time_ms < before.step_time_ms
    for term in ("compute", "hbm"):
        assert after.breakdown_ms[term] == pytest.approx(sp_only.breakdown_ms[term])


def test_a_config_that_already_overlaps_or_cannot_is_not_offered_it() -> None:
    # Megatron-Core's weak-scaling README rows state --tp-comm-overlap (eval case megatron.yaml)
    on = load_config(EVAL / "megatron-core-h100-weak-scaling-gpt-16b" / "megatron.yaml")
    assert _changes(on, settings_from_config(on), "megatron") == []
    # --transformer-impl local has no userbuffers
    local = parse_config(GPT175.read_text().replace("--seq-length 2048", "--seq-length 2048 --transformer-impl local"),
                         GPT175.name)
    assert _changes(local, settings_from_config(local), "megatron") == []
    # NeMo 1.x switches it with ub_tp_comm_overlap (NeMo-Framework-Launcher gpt3 20b: True, 5b: False), which ASAP
    # does not price: no proposal claims a gain from it either way
    for nemo in ("launcher_gpt3_20b.yaml", "gpt3_5b.yaml"):
        cfg = load_config(REAL / "nemo" / nemo)
        assert _changes(cfg, settings_from_config(cfg), "megatron") == []
    # MaxText: XLA's async collective flags are not priced, so not proposed
    maxtext = load_config(EVAL / "maxtext-v5p-128b-1x256" / "mesh.yml")
    assert _changes(maxtext, settings_from_config(maxtext), "maxtext") == []


@pytest.mark.parametrize(("toml", "edit", "async_key", "compile_key", "compiled_loss"), [
    # spring 2025: compile off -> both written; the loss is compiled from April 2025 (#1033)
    ("2025-spring/llama3_70b.toml", None, "parallelism.enable_async_tensor_parallel", "training.compile", True),
    # February 2026: compile through [compile] enable
    ("2026/llama3_70b.toml", None, "parallelism.enable_async_tensor_parallel", "compile.enable", True),
    # 2024: the experimental table, and no compiled loss yet
    ("2024/llama3_405b.toml", ("compile = true", "compile = false"), "experimental.enable_async_tensor_parallel",
     "training.compile", False),
])
def test_torchtitan_async_tp_is_written_in_the_files_own_layout_with_compile(
        toml: str, edit: tuple[str, str] | None, async_key: str, compile_key: str, compiled_loss: bool) -> None:
    text = (TITAN / toml).read_text()
    if edit:
        text = text.replace(*edit).replace("enable_async_tensor_parallel = true", "enable_async_tensor_parallel = false")
    cfg = parse_config(text, "llama.toml")
    settings = settings_from_config(cfg)
    assert not settings.tp_comm_overlap
    [change] = _changes(cfg, settings)
    assert set(change.config_values) == {async_key, compile_key}
    assert "compile is turned on too" in change.words[0]
    again = settings_from_config(parse_config(apply_settings(cfg, change.config_values), "llama.toml"))
    applied = apply(settings, change, framework="other")
    assert again.tp_comm_overlap is True is applied.tp_comm_overlap
    assert again.loss_compiled is compiled_loss is applied.loss_compiled


def test_async_tp_proposal_on_torchtitans_vanilla_row_predicts_about_the_measured_gain() -> None:
    """The vanilla-TP row of torchtitan's table (compile on from the command line): turning on async TP alone on its
    mesh is predicted within the table's measured gains (1.04-1.16x over the six vanilla/async pairs)."""
    run = LocalRunStore(EVAL).get("torchtitan-asynctp-h100-llama3-70b-bf16-vanilla")
    settings = settings_for_run(run)
    cfg = load_run_config(run)  # the TOML with the recorded command (--training.compile)
    mesh, _ = baseline_mesh(run, None)
    [change] = _changes(cfg, settings)
    assert change.config_values == {"parallelism.enable_async_tensor_parallel": True}  # compile: on the command
    before = costmodel.predict(run.record, mesh, settings=settings).step_time_ms
    after = costmodel.predict(run.record, mesh, settings=apply(settings, change, framework="other")).step_time_ms
    assert 1.04 <= before / after <= 1.16
    # and the answer for that run carries it, written in the TOML
    pset = propose(run, analyze_run(run))
    overlap = [p for p in pset.proposals if "tp-overlap" in p.kind]
    assert overlap and "+enable_async_tensor_parallel = true" in (overlap[0].diff or "")
    assert all("tensor" in p.mesh_short for p in overlap)  # never on a mesh without tensor parallelism


def test_tp_overlap_takes_direction_enable_only() -> None:
    with pytest.raises(ValidationError, match="tp_overlap, ep_overlap, whole_experts, hsdp and dp_overlap take enable"):
        SettingsMove(change="tp_overlap", direction="up")
    with pytest.raises(ValidationError, match="tp_overlap, ep_overlap, whole_experts, hsdp and dp_overlap take enable"):
        SettingsMove(change="ep_overlap", direction="lighter")
    with pytest.raises(ValidationError, match="whole_experts, hsdp and dp_overlap take enable"):
        SettingsMove(change="whole_experts", direction="up")
    with pytest.raises(ValidationError, match="hsdp and dp_overlap take enable"):
        SettingsMove(change="hsdp", direction="down")
    with pytest.raises(ValidationError):
        SettingsMove(change="remat", direction="enable")


def test_a_megatron_run_is_answered_with_the_flags_on_the_launch(tmp_path: Path) -> None:
    run_dir = tmp_path / "g175"
    run_dir.mkdir()
    shutil.copy(GPT175, run_dir / GPT175.name)
    (run_dir / "run.yaml").write_text(f"id: g175\nchip: h100\nnum_chips: 128\nnum_slices: 16\nconfig: {GPT175.name}\n")
    run = LocalRunStore(tmp_path).get("g175")
    pset = propose(run, analyze_run(run))
    overlap = [p for p in pset.proposals if "tp-overlap" in p.kind]
    assert overlap, [p.kind for p in pset.proposals]
    p = overlap[0]
    assert "--tp-comm-overlap --sequence-parallel" in (p.diff or "")
    assert not any("cannot carry" in t for t in p.tradeoffs)
    assert any("Transformer Engine" in t for t in p.tradeoffs)
