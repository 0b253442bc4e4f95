"""Megatron precision and Megatron-FSDP settings read from real launch scripts, and what they do to memory.

Fixtures: Megatron-LM's own 8 x H100 fp8 examples at d98e8a64 (tests/data/real/README.md):
``examples/llama/train_llama3_8b_h100_fp8.sh`` (``--fp8-format hybrid``, ``--fp8-param-gather``,
``--grad-reduce-in-bf16``, distributed optimizer, no recompute, seq 8192) and
``examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh`` (``--use-megatron-fsdp``, sharding strategy
``optim_grads_params``). Megatron ships both as runnable recipes for one 8-GPU H100 node; before these settings
were read ASAP called the first out of memory (103 GB: fp32 gradients, bf16 weights, bf16 saved inputs).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.proposals  # noqa: F401  (registers propose)
from bot.cli import cli
from bot.configs.detect import load_config
from bot.configs.mesh import Mesh
from bot.runs.record import RunRecord
from knowledge import costmodel
from knowledge.cost_remat import Dims, everything_bytes
from knowledge.cost_settings import settings_from_config
from knowledge.cost_shapes import resolve_shape
from knowledge.remat_state import remat_state

MEGATRON = Path(__file__).parent / "data" / "real" / "megatron"
DDP = "train_llama3_8b_h100_fp8.sh"
FSDP = "train_llama3_8b_fsdp_h100_fp8.sh"
H100_HBM_GB = 85.5  # 80 GiB


def _settings(name: str):  # type: ignore[no-untyped-def]
    return settings_from_config(load_config(MEGATRON / name, root=MEGATRON))


def _run(tmp_path: Path, name: str) -> Path:
    run = tmp_path / "llama3"
    run.mkdir(parents=True)
    shutil.copy(MEGATRON / name, run / "train.sh")
    (run / "run.yaml").write_text("id: llama3\nchip: h100\nnum_chips: 8\nconfig: train.sh\n")
    return tmp_path


def _propose(runs: Path) -> dict:  # type: ignore[type-arg]
    out = CliRunner().invoke(cli, ["--runs-dir", str(runs), "propose", "llama3", "--json", "--no-diff"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)  # type: ignore[no-any-return]


def test_fp8_launch_flags_are_read() -> None:
    s = _settings(DDP)
    assert s.fp8 is True  # --fp8-format hybrid
    assert s.fp8_params is True  # --fp8-param-gather
    assert s.grad_fp32 is False  # --grad-reduce-in-bf16 turns accumulate_allreduce_grads_in_fp32 off
    assert s.fused_cross_entropy is True  # --cross-entropy-loss-fusion
    assert s.distributed_optimizer is True
    assert s.megatron_fsdp is False and s.zero_stage is None


def test_fp8_params_and_bf16_gradients_price_the_model_state() -> None:
    s = _settings(DDP)
    shape = resolve_shape(RunRecord(id="r", chip="h100", num_chips=8, config="train.sh"), s)
    assert shape.fp8  # matmuls at the fp8 peak although run.yaml states no dtype
    assert (shape.weight_bytes, shape.grad_bytes, shape.optimizer_bytes) == (1.0, 2.0, 12.0)
    assert any("fp8 parameters" in a for a in shape.assumptions)
    assert any("Transformer Engine keeps the linear layers' saved inputs in fp8" in a for a in shape.assumptions)


def test_megatrons_own_8_gpu_fp8_example_fits_on_8_h100(tmp_path: Path) -> None:
    answer = _propose(_run(tmp_path, DDP))
    memory = next(c for c in answer["baseline"]["critic"] if c["name"] == "memory")
    assert memory["passed"], memory["reason"]
    # 8B params: fp8 weights 8 GB + bf16 gradients 16 GB + 12 B optimizer state / 8 ranks 12 GB, plus
    # seq-8192 activations without recompute (~34 bytes x d_model per token per layer, less TE's fp8 copies)
    current = answer["baseline"]["predicted"]["memory_per_chip_bytes"] / 1e9
    assert 60.0 < current < H100_HBM_GB * 0.9, current


def test_megatron_fsdp_strategy_shards_weights_gradients_and_optimizer(tmp_path: Path) -> None:
    s = _settings(FSDP)
    assert s.megatron_fsdp is True and s.zero_stage == 3  # optim_grads_params
    answer = _propose(_run(tmp_path, FSDP))
    assert any("Megatron-FSDP: optimizer state, gradients and parameters sharded" in n
               for n in answer["baseline"]["predicted"]["assumptions"]), answer["baseline"]["predicted"]["assumptions"]
    fsdp_mem = answer["baseline"]["predicted"]["memory_per_chip_bytes"]
    ddp_mem = _propose(_run(tmp_path / "ddp", DDP))["baseline"]["predicted"]["memory_per_chip_bytes"]
    assert fsdp_mem < ddp_mem - 10e9  # the 8 GB of weights and 16-32 GB of gradients are split 8 ways


@pytest.mark.parametrize(("strategy", "stage"), [("no_shard", 0), ("optim", 1), ("optim_grads", 2)])
def test_megatron_fsdp_strategies_map_to_zero_stages(tmp_path: Path, strategy: str, stage: int) -> None:
    text = (MEGATRON / FSDP).read_text().replace('SHARDING_STRATEGY=${SHARDING_STRATEGY:-"optim_grads_params"}',
                                                 f'SHARDING_STRATEGY=${{SHARDING_STRATEGY:-"{strategy}"}}')
    (tmp_path / FSDP).write_text(text)
    assert settings_from_config(load_config(tmp_path / FSDP, root=tmp_path)).zero_stage == stage


def test_transformer_engine_fp8_keeps_linear_inputs_in_one_byte() -> None:
    llama3_8b = Dims(d_model=4096, d_ff=14336, heads=32, kv_heads=8, head_dim=128, mlp_matrices=3, top_k=1,
                     seq_len=8192)
    bf16 = sum(everything_bytes(llama3_8b, dropout=False))
    fp8 = sum(everything_bytes(llama3_8b, dropout=False, fp8_inputs=True))
    assert bf16 == 34 * 4096  # KOR-style count for this width: 34 h bytes per token per layer
    # two norm outputs (2 h -> h each) and the SwiGLU output (2 d_ff -> d_ff) halve; the out-projection adds a
    # 1-byte copy of the attention output next to the flash kernel's bf16 one
    assert bf16 - fp8 == 2 * 4096 + 14336 - 32 * 128


def test_a_launch_without_recompute_flags_does_not_recompute() -> None:
    state = remat_state(_settings(DDP), "other", None)
    assert state.recomputes is False
    assert "Megatron-LM default" in state.source


def test_nemo_yaml_fp8_false_does_not_override_a_run_stating_fp8(tmp_path: Path) -> None:
    cfg = tmp_path / "nemo.yaml"
    cfg.write_text("trainer:\n  devices: 8\nmodel:\n  tensor_model_parallel_size: 1\n  fp8: False\n"
                   "  micro_batch_size: 1\n  global_batch_size: 8\n")
    s = settings_from_config(load_config(cfg, root=tmp_path))
    assert s.fp8 is False
    record = RunRecord(id="r", chip="h100", num_chips=8, framework="megatron", config="nemo.yaml",
                       model={"layers": 2, "d_model": 256, "d_ff": 1024, "heads": 4, "vocab": 1000},
                       training={"global_batch": 8, "seq_len": 128, "dtype": "fp8"})
    assert resolve_shape(record, s).fp8


def test_a_run_that_ran_is_not_called_out_of_memory_when_the_model_over_counts(tmp_path: Path) -> None:
    # The same real launch with its memory-saving flags removed and micro-batch 2: every setting is stated (a launch
    # is Megatron's whole argument list) and ASAP predicts ~128 GB on an 80 GB H100. Without a measurement that is
    # "out of memory"; with a measured step the run evidently ran, so its peak was at most the HBM.
    runs = _run(tmp_path, DDP)
    script = runs / "llama3" / "train.sh"
    text = script.read_text().replace("--grad-reduce-in-bf16", "").replace('"--fp8-param-gather"', "")
    script.write_text(text.replace("MICRO_BATCH_SIZE=1", "MICRO_BATCH_SIZE=2"))
    before = next(c for c in _propose(runs)["baseline"]["critic"] if c["name"] == "memory")
    assert not before["passed"] and before["reason"].startswith("out of memory")
    run_yaml = runs / "llama3" / "run.yaml"
    run_yaml.write_text(run_yaml.read_text() + "measured:\n  step_time_ms: 12000\n")
    answer = _propose(runs)
    after = next(c for c in answer["baseline"]["critic"] if c["name"] == "memory")
    assert after["passed"], after["reason"]
    assert any(n.startswith("the run ran, but the memory model predicted") for n in answer["notes"])
    assert answer["baseline"]["predicted"]["memory_per_chip_bytes"] <= H100_HBM_GB * 1e9 * 1.001


def test_an_out_of_memory_launch_is_offered_the_recompute_that_keeps_its_mesh(tmp_path: Path) -> None:
    # The real launch with its memory-saving flags removed and micro-batch 2: ~128 GB on an 80 GB H100. Besides mesh
    # changes, the change a person makes first is to recompute activations at the same mesh. Megatron-Core refuses
    # full granularity without --recompute-method and --recompute-num-layers, so all three are written.
    runs = _run(tmp_path, DDP)
    script = runs / "llama3" / "train.sh"
    text = script.read_text().replace("--grad-reduce-in-bf16", "").replace('"--fp8-param-gather"', "")
    script.write_text(text.replace("MICRO_BATCH_SIZE=1", "MICRO_BATCH_SIZE=2"))
    out = CliRunner().invoke(cli, ["--runs-dir", str(runs), "propose", "llama3", "--json"])
    assert out.exit_code == 0, out.output
    answer = json.loads(out.output)
    assert answer["verdict"] == "current_fails"
    [keep] = [p for p in answer["proposals"] if p["kind"] == "remat-heavier"]
    assert keep["mesh_short"] == answer["baseline"]["mesh_short"]
    assert keep["predicted"]["memory_per_chip_bytes"] < 0.9 * H100_HBM_GB * 1e9
    assert "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1" in keep["diff"]
    assert keep["change"]["step_time_percent"] > 0  # recomputation costs time, and the answer says how much


def _nvfp4(tmp_path: Path) -> Path:
    """Megatron-LM's fp8 example with its DTYPE_ARGS switched to NVFP4 (Megatron-Core transformer_config.py:
    ``fp4`` <- ``--fp4-format e2m1``, ``fp4_param`` <- ``--fp4-param-gather``; arguments.py refuses fp4 and fp8
    together, so the fp8 flags go)."""
    text = (MEGATRON / DDP).read_text().replace(
        '"--fp8-format hybrid"\n        "--fp8-amax-history-len 1024"\n        "--fp8-amax-compute-algo max"\n'
        '        "--fp8-param-gather"', '"--fp4-format e2m1"\n        "--fp4-param-gather"')
    assert "--fp4-format" in text
    (tmp_path / "nvfp4.sh").write_text(text)
    return tmp_path / "nvfp4.sh"


def test_nvfp4_launch_flags_run_the_matmuls_at_the_fp4_peak_and_keep_fp4_weights(tmp_path: Path) -> None:
    s = settings_from_config(load_config(_nvfp4(tmp_path), root=tmp_path))
    assert s.fp4 is True and s.fp4_params is True and s.fp8 is None
    record = RunRecord(id="r", chip="b200", num_chips=8, config="nvfp4.sh")
    shape = resolve_shape(record, s)
    assert shape.fp4 and not shape.fp8  # run.yaml states no dtype: the launch's --fp4-format is what ran
    assert shape.weight_bytes == pytest.approx(0.5625)  # 4-bit values + an fp8 scale per 16
    assert any("--fp4-format" in a for a in shape.assumptions)
    bf16 = resolve_shape(record, _settings(DDP).model_copy(update={"fp8": None, "fp8_params": None}))
    mesh = Mesh(ici={"data": 8})
    fp4_step = costmodel.predict(record, mesh, settings=s).breakdown_ms["compute"]
    bf16_step = costmodel.predict(record, mesh, settings=_settings(DDP).model_copy(
        update={"fp8": False, "fp8_params": None})).breakdown_ms["compute"]
    assert not bf16.fp4 and fp4_step < 0.75 * bf16_step  # B200's dense fp4 peak is 4x its bf16 one on the linears


def _reduction_note(name: str) -> str:
    s = _settings(name)
    pred = costmodel.predict(RunRecord(id="r", chip="h100", num_chips=8, config="train.sh"), Mesh(ici={"data": 8}),
                             settings=s)
    return next(a for a in pred.assumptions if "gradients reduced in" in a)


def test_the_answer_says_in_which_dtype_megatron_reduces_the_gradients() -> None:
    """Megatron-LM reduces a bf16 run's gradients in fp32 unless --grad-reduce-in-bf16 (arguments.py @ d98e8a64: "bfloat16
    requires gradient accumulation and all-reduce to be done in fp32"). The FSDP example leaves the default; the DDP
    example sets the flag. The answer used to say "reduced in bf16" for both."""
    assert "reduced in fp32 (Megatron's default for bf16" in _reduction_note(FSDP)
    assert "priced as bf16 traffic" in _reduction_note(FSDP)  # the pricing choice is named, not hidden
    assert _reduction_note(DDP).endswith("gradients reduced in bf16")
