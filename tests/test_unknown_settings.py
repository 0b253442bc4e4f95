"""Unstated settings are uncertainty: the memory check spans their options and names the one that decides.

The config is a NeMo-style Megatron YAML for Llama-2-70B on 64 H100s (8 nodes x 8, tensor 8, data 8); the
published NeMo/Megatron-Bridge recipes for this model set the distributed optimizer, which this file leaves
out on purpose."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.analysis.analyze import analyze_run
from bot.configs.mesh import Mesh
from bot.proposals.critic import critique
from bot.proposals.engine import propose
from bot.runs.store import LocalRunStore
from knowledge.cost_settings import TrainingSettings, unknown_settings, with_options

CONFIG = """trainer: {devices: 8, num_nodes: 8}
model:
  tensor_model_parallel_size: 8
  pipeline_model_parallel_size: 1
  sequence_parallel: true
  micro_batch_size: 1
  global_batch_size: 512
  seq_length: 4096
  recompute_granularity: selective
"""
LLAMA2_70B = {"name": "llama2-70b", "layers": 80, "d_model": 8192, "d_ff": 28672, "heads": 64, "kv_heads": 8,
              "vocab": 32000}


def _run(tmp_path: Path, extra: str = "", *, tensor: int = 8) -> object:
    folder = tmp_path / "runs" / "m1"
    folder.mkdir(parents=True)
    (folder / "megatron.yaml").write_text(CONFIG.replace("tensor_model_parallel_size: 8",
                                                        f"tensor_model_parallel_size: {tensor}") + extra)
    (folder / "run.yaml").write_text(yaml.safe_dump({
        "id": "m1", "framework": "megatron", "chip": "h100", "num_chips": 64, "num_slices": 8,
        "config": "megatron.yaml", "profile": [], "model": LLAMA2_70B,
        "training": {"global_batch": 512, "seq_len": 4096, "micro_batch": 1}}))
    return LocalRunStore(tmp_path / "runs").get("m1")


def test_unstated_settings_are_named_and_stated_ones_are_not() -> None:
    s = TrainingSettings(format="megatron", sequence_parallel=True, remat_policy="selective",
                         remat_key="model.recompute_granularity", micro_batch=1)
    names = [u.name for u in unknown_settings(s, "megatron", None)]
    assert names == ["distributed_optimizer"]  # sequence parallel, recompute and micro-batch size are stated
    assert {u.name for u in unknown_settings(TrainingSettings(format="megatron"), "megatron", None)} == {
        "distributed_optimizer", "micro_batch", "sequence_parallel", "remat"}
    assert unknown_settings(TrainingSettings(format="megatron"), "megatron", "full")[-1].name != "remat"  # run.yaml
    assert unknown_settings(TrainingSettings(format="maxtext"), "maxtext", None) == []  # documented defaults
    plain = [u.name for u in unknown_settings(TrainingSettings(format="ici_mesh"), "other", None)]
    assert plain == ["flash_attention", "cross_entropy", "remat"]  # a PyTorch trainer documents none of them
    assert [u.name for u in unknown_settings(TrainingSettings(format="ici_mesh"), "jax", None)] == [
        "flash_attention", "remat"]  # XLA fuses the loss (knowledge.cost_shapes._xla_tpu_loss_fused)
    assert "cross_entropy" not in {u.name for u in unknown_settings(TrainingSettings(format="ici_mesh"), "other",
                                                                    None, torchtitan=True)}  # torchtitan's is known
    assert [u.name for u in unknown_settings(TrainingSettings(format="ici_mesh", flash_attention=True), "jax",
                                             "full")] == []
    lean = with_options(TrainingSettings(format="megatron"), unknown_settings(TrainingSettings(format="megatron"),
                                                                              "megatron", None), "lean")
    assert lean.distributed_optimizer is True and lean.sequence_parallel is True and lean.remat_policy == "full"
    assert lean.micro_batch == 1


def test_fits_only_with_the_deciding_setting_named_not_out_of_memory(tmp_path: Path) -> None:
    run = _run(tmp_path)
    ps = propose(run, analyze_run(run), knowledge=False)  # type: ignore[arg-type]
    mem = next(c for c in ps.baseline.critic if c.name == "memory")
    assert not mem.passed and not mem.hard  # a published-style config is not called out of memory
    assert mem.reason.startswith("fits only with the distributed optimizer (set use_distributed_optimizer: true)")
    assert "across the options of the distributed optimizer" in mem.reason
    assert ps.verdict != "current_fails"
    assert "the current config fits only with the distributed optimizer" in ps.summary
    assert any("not stated, so the memory check spans their options" in n for n in ps.notes)


def test_stating_the_setting_removes_the_uncertainty(tmp_path: Path) -> None:
    run = _run(tmp_path, "  use_distributed_optimizer: true\n")
    c = critique(run, Mesh(ici={"tensor": 8}, dcn={"data": 8}), report=analyze_run(run))  # type: ignore[arg-type]
    mem = c.check("memory")
    assert mem is not None and mem.passed and "fits:" in mem.reason and "options" not in mem.reason


def test_out_of_memory_only_when_even_the_leanest_option_is_beyond(tmp_path: Path) -> None:
    # tensor 1 x data 64: 70B parameters' bf16 weights and fp32 gradients alone (6 B/param = 420 GB) exceed
    # an 80 GB H100 whatever the optimizer sharding: a fact, a hard failure.
    run = _run(tmp_path, tensor=1)
    c = critique(run, Mesh(dcn={"data": 8}, ici={"data": 8}), report=analyze_run(run))  # type: ignore[arg-type]
    mem = c.check("memory")
    assert mem is not None and not mem.passed and mem.hard
    assert mem.reason.startswith("out of memory whatever the unstated settings")
    assert not c.ok


@pytest.mark.parametrize("stated", [False, True])
def test_band_spans_both_options(tmp_path: Path, stated: bool) -> None:
    run = _run(tmp_path, "  use_distributed_optimizer: false\n" if stated else "")
    c = critique(run, Mesh(ici={"tensor": 8}, dcn={"data": 8}), report=analyze_run(run))  # type: ignore[arg-type]
    mem = c.check("memory")
    assert mem is not None
    if stated:  # stated off: the hungry option is a fact, and it does not fit
        assert not mem.passed and "fits only" not in mem.reason
    else:
        assert "GB to" in mem.reason and "per chip across the options" in mem.reason


def test_headroom_is_stated_and_no_published_run_that_ran_contradicts_it() -> None:
    from bot.proposals.memory import PUBLISHED_PEAKS, headroom_envelope
    from knowledge.costmodel import DEFAULT_HEADROOM

    envelope, where = headroom_envelope()
    # every published peak that ran fits in what the Critic calls usable: the headroom is not a guess above them
    assert all(peak <= cap * (1 - DEFAULT_HEADROOM) for _, peak, cap, _ in PUBLISHED_PEAKS)
    assert DEFAULT_HEADROOM <= envelope and "torchtitan" in where


def test_memory_reason_says_where_the_headroom_comes_from(tmp_path: Path) -> None:
    run = _run(tmp_path, "  use_distributed_optimizer: true\n")
    mem = critique(run, Mesh(ici={"tensor": 8}, dcn={"data": 8}), report=analyze_run(run)).check("memory")  # type: ignore[arg-type]
    assert mem is not None and "published peaks that ran reach 88.4% of HBM" in mem.reason


def test_unstated_recompute_widens_the_uncalibrated_step_time_band(tmp_path: Path) -> None:
    stated_run = _run(tmp_path / "a", "  use_distributed_optimizer: true\n")
    stated = propose(stated_run, analyze_run(stated_run), knowledge=False)  # type: ignore[arg-type]
    folder = tmp_path / "b"
    run = _run(folder, "  use_distributed_optimizer: true\n")
    cfg = folder / "runs" / "m1" / "megatron.yaml"
    cfg.write_text(cfg.read_text().replace("  recompute_granularity: selective\n", ""))  # recompute not stated
    unstated = propose(LocalRunStore(folder / "runs").get("m1"), analyze_run(run), knowledge=False)  # type: ignore[arg-type]
    b0, b1 = stated.baseline.predicted, unstated.baseline.predicted
    assert b0 is not None and b1 is not None
    assert (b1.step_time_high_ms - b1.step_time_low_ms) > (b0.step_time_high_ms - b0.step_time_low_ms)
    assert any("not stated: activation recompute; the step-time band spans their options" in a for a in b1.assumptions)


@pytest.mark.parametrize("extra", ["", "  account_for_embedding_in_pipeline_split: true\n"
                                       "  account_for_loss_in_pipeline_split: true\n"])
def test_megatron_uneven_pipeline_is_a_warning_naming_the_settings_that_allow_it(tmp_path: Path, extra: str) -> None:
    # Megatron-Bridge runs Llama 3.1 405B (126 layers) on PP8 with the embedding and loss counted as stages
    # (performance summary 25.11, DGX-H100 row LLAMA3.1_405B): not a start-up refusal.
    folder = tmp_path / "runs" / "p8"
    folder.mkdir(parents=True)
    (folder / "megatron.yaml").write_text(
        "trainer: {devices: 8, num_nodes: 128}\nmodel:\n  tensor_model_parallel_size: 8\n"
        "  pipeline_model_parallel_size: 8\n  context_parallel_size: 2\n  micro_batch_size: 1\n"
        "  global_batch_size: 512\n  seq_length: 8192\n" + extra)
    (folder / "run.yaml").write_text(yaml.safe_dump({
        "id": "p8", "framework": "megatron", "chip": "h100", "num_chips": 1024, "num_slices": 128,
        "config": "megatron.yaml", "profile": [],
        "model": {"layers": 126, "d_model": 16384, "d_ff": 53248, "heads": 128, "kv_heads": 8, "vocab": 128256},
        "training": {"global_batch": 512, "seq_len": 8192, "micro_batch": 1}}))
    run = LocalRunStore(tmp_path / "runs").get("p8")
    from bot.proposals.context import baseline_mesh

    base, _ = baseline_mesh(run, None)
    c = critique(run, base).check("divisibility")
    assert c is not None and not c.passed and not c.hard
    if extra:
        assert "as the config's account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split allow" in c.reason
    else:
        assert "126 layers + embedding + loss = 128 = 8 x 16: set account_for_embedding_in_pipeline_split" in c.reason


def test_a_megatron_launch_script_omits_flags_at_their_argparse_defaults(tmp_path: Path) -> None:
    """Megatron-LM's own example launch (tests/data/real): what the torchrun line leaves out is off, by
    arguments.py's defaults (--use-distributed-optimizer, --sequence-parallel are store_true; no
    --recompute-granularity means no recompute). That is stated, not unknown; a YAML summary stays unknown."""
    from bot.configs.detect import load_config
    from knowledge.cost_settings import settings_from_config

    script = Path(__file__).parent / "data" / "real" / "megatron" / "train_gpt3_175b_distributed.sh"
    settings = settings_from_config(load_config(script))
    assert settings.launch_defaults
    assert unknown_settings(settings, "megatron", None) == []
    yaml_settings = TrainingSettings(format="megatron")
    assert {u.name for u in unknown_settings(yaml_settings, "megatron", None)} >= {"distributed_optimizer",
                                                                                    "sequence_parallel", "remat"}


def _predict(run: object, settings: TrainingSettings | None, mesh: Mesh) -> object:
    from knowledge import costmodel

    return costmodel.predict(run.record, mesh, settings=settings)  # type: ignore[attr-defined]


def test_unstated_sequence_parallel_in_a_megatron_yaml_is_priced_as_the_recipes_run_it() -> None:
    """NeMo 24.07's published GPT3-175B row on 512 H100s (TP 4, PP 8; examples/eval, 842 model TFLOP/s per GPU)
    leaves sequence parallelism unstated. NeMo-Framework-Launcher's GPT-3 configs set it exactly when TP > 1
    (tests/data/real/nemo: 5b.yaml TP 1 False, 20b.yaml TP 2 True), so the point estimate prices it on, the
    answer says so, and the band still reaches the slower "off" option."""
    from bot.configs.detect import load_run_config
    from bot.proposals.predict import widen_for_unknowns
    from knowledge.cost_settings import settings_for_run
    from knowledge.hardware import get_chip

    eval_dir = Path(__file__).resolve().parents[1] / "examples" / "eval"
    run = LocalRunStore(eval_dir).get("nemo-24.07-h100-gpt3-175b-512gpu")
    settings = settings_for_run(run)
    assert settings is not None and settings.sequence_parallel is None
    mesh = load_run_config(run).mesh(run.record.num_chips, run.record.num_slices)
    point = _predict(run, settings, mesh)
    off = _predict(run, settings.model_copy(update={"sequence_parallel": False}), mesh)
    on = _predict(run, settings.model_copy(update={"sequence_parallel": True}), mesh)
    assert point.step_time_ms == pytest.approx(on.step_time_ms)  # type: ignore[attr-defined]
    assert off.step_time_ms > 1.1 * point.step_time_ms  # type: ignore[attr-defined]  # replicated layer norms at TP 4
    assert any("sequence parallelism not stated: priced on at tensor > 1" in a for a in point.assumptions)  # type: ignore[attr-defined]
    unknowns = unknown_settings(settings, run.record.framework, None)
    wide = widen_for_unknowns(run.record, get_chip(run.record.chip), None, unknowns, mesh, settings, point)
    assert wide.step_time_high_ms >= off.step_time_ms  # type: ignore[attr-defined]
    # the published throughput: the point estimate lands within 10% of it, the "off" option does not
    measured_ms = 10475.7  # 782 tokens/s/GPU x 512 GPUs = 400,384 tokens/s; 2048 x 2048 = 4,194,304 tokens per step
    assert abs(point.step_time_ms / measured_ms - 1) < 0.10  # type: ignore[attr-defined]
    assert abs(off.step_time_ms / measured_ms - 1) > 0.15  # type: ignore[attr-defined]


def test_a_megatron_launch_without_the_flag_is_priced_without_sequence_parallelism() -> None:
    """Megatron-LM's GPT-3 175B example (TP 8) omits --sequence-parallel: argparse's default, off, is stated."""
    from bot.configs.detect import load_config
    from knowledge.cost_settings import settings_from_config
    from knowledge.cost_shapes import _megatron_sequence_parallel

    script = Path(__file__).parent / "data" / "real" / "megatron" / "train_gpt3_175b_distributed.sh"
    settings = settings_from_config(load_config(script))
    notes: list[str] = []
    assert _megatron_sequence_parallel(settings, notes) is False and notes == []


def test_unstated_distributed_optimizer_in_a_megatron_yaml_is_priced_as_the_recipes_run_it() -> None:
    """Megatron-Bridge 25.11's published LLAMA3_8B row on 8 GB200s (DP 8, MBS 2, 8,192 tokens, FP8-CS; 31,508
    tokens/s/GPU, examples/eval) ran; its case leaves the distributed optimizer unstated, as the table does. Megatron-
    Bridge's recipes build DistributedDataParallelConfig(use_distributed_optimizer=True), so the point estimate shards
    the Adam state over the 8 ranks and the run fits in 186 GB; priced off (Megatron-LM's argparse default) the
    unsharded 12 B per parameter put the point at ~205 GiB, out of memory. The band still spans the off option."""
    from knowledge.cost_settings import settings_for_run
    from knowledge.cost_shapes import _megatron_distributed_optimizer

    eval_dir = Path(__file__).resolve().parents[1] / "examples" / "eval"
    run = LocalRunStore(eval_dir).get("mbridge-25.11-gb200-llama3-8b-8gpu")
    settings = settings_for_run(run)
    assert settings is not None and settings.distributed_optimizer is None
    mesh = Mesh(ici={"data": 8})
    point = _predict(run, settings, mesh)
    off = _predict(run, settings.model_copy(update={"distributed_optimizer": False}), mesh)
    assert point.fits_memory and not off.fits_memory  # type: ignore[attr-defined]
    assert any("distributed optimizer not stated: priced on" in a for a in point.assumptions)  # type: ignore[attr-defined]
    assert "distributed_optimizer" in {u.name for u in unknown_settings(settings, "megatron", None)}
    # a Megatron-LM launch that omits --use-distributed-optimizer states it off (argparse's default)
    from bot.configs.detect import load_config
    from knowledge.cost_settings import settings_from_config

    script = Path(__file__).parent / "data" / "real" / "megatron" / "train_gpt3_175b_distributed.sh"
    notes: list[str] = []
    assert _megatron_distributed_optimizer(settings_from_config(load_config(script)), set(), notes) is False
    assert notes == []


def test_unstated_megatron_micro_batch_is_split_as_megatron_splits_it() -> None:
    """Megatron-LM README's weak-scaling table (examples/eval/megatron-core-h100-weak-scaling-*) states no
    micro-batch size. Megatron always splits a rank's batch into micro-batches of --micro-batch-size (it requires
    the flag), so the point estimate uses the recipes' 1 and says so; the band and memory span NeMo 1.x's default
    of 4. The 1.7B row (4 sequences per rank) then runs four 4096-token micro-batches, not one of 16,384 tokens,
    which is slower (narrower matmuls): the table's measured 408.8 TFLOP/s/GPU is its lowest."""
    from bot.configs.detect import load_run_config
    from knowledge import costmodel
    from knowledge.cost_settings import settings_for_run

    eval_dir = Path(__file__).resolve().parents[1] / "examples" / "eval"
    run = LocalRunStore(eval_dir).get("megatron-core-h100-weak-scaling-gpt-1.7b")
    settings = settings_for_run(run)
    assert settings is not None and settings.micro_batch is None
    assert "micro_batch" in {u.name for u in unknown_settings(settings, "megatron", None)}
    mesh = load_run_config(run).mesh(run.record.num_chips, run.record.num_slices)
    point = costmodel.predict(run.record, mesh, settings=settings)
    assert any("micro_batch_size not stated: priced at 1" in a for a in point.assumptions)
    one_batch = costmodel.predict(run.record, mesh, settings=settings.model_copy(update={"micro_batch": 4}))
    assert point.step_time_ms > one_batch.step_time_ms  # narrower matmuls per micro-batch
