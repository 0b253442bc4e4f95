"""Megatron-Bridge's 26.04.01 rows that needed LatentMoE, hybrid MTP modules or Muon priced: Nemotron 3 Super's four
MXFP8 rows and Kimi K2's (docs/performance-summary-archive.md @ 067f987df03b, lines 282-288 and 264; recipe settings
from scripts/performance @ 21d102f5e; scripts/eval_cases_mbridge_260401.py writes them). Nemotron 3 Super:

=========  ====  ==  ==  ==================  =================
system     GPUs  TP  EP  tokens/s/GPU        model TFLOP/s/GPU
=========  ====  ==  ==  ==================  =================
DGX-GB300    64   1  64  9,344               795
DGX-GB200    64   2  64  6,656               564
DGX-B300     64   1   8  7,296               623
DGX-B200     64   1  64  6,400               542
=========  ====  ==  ==  ==================  =================

Three expert layouts of one LatentMoE model: EP 64 inside an NVLink domain, EP 8 inside eight-GPU nodes, and EP 64
across eight nodes over InfiniBand. Kimi K2: 256 DGX-GB300, PP 4 x VP 4, EP 64, distributed Muon, 5,328 tokens/s/GPU.
Every row ran, so each must fit; none was used to fit anything.

The same script writes the section's other Blackwell rows the corpus lacked (lines 201-257: Llama 3 70B and 3.1 405B
on GB300, DeepSeek-V3 on GB300 / B300 / B200, GPT-OSS 120B BF16 and Qwen3 30B-A3B / 235B-A22B MXFP8 on all four
systems), each with its recipe function and preset at 21d102f5e; out-of-sample checks too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.proposals.critic import critique
from bot.proposals.engine import baseline_mesh
from bot.runs.store import LocalRunStore
from knowledge.cost_settings import settings_for_run
from tests.published_cases import EVAL, assert_script_writes, load_script, predict_case

ROWS = [("gb300", 9344), ("gb200", 6656), ("b300", 7296), ("b200", 6400)]
KIMI = "mbridge-26.04.01-gb300-kimi-k2-256gpu-mxfp8"
SCRIPT = load_script("eval_cases_mbridge_260401")


def _more() -> list[tuple[str, dict[str, str]]]:
    """The other Blackwell rows the script writes: (case id, the row as the archive prints it, parsed)."""
    out = []
    for model, lines in SCRIPT.MORE_ROWS.items():
        for _, line in lines:
            row = SCRIPT.mbridge_cases.parse_row(line, SCRIPT.COLUMNS)
            cid = (f"mbridge-26.04.01-{SCRIPT.CHIP[row['System']]}-{SCRIPT.SLUG[model]}-{row['#-GPUs']}gpu-"
                   f"{row['Precision'].lower()}")
            out.append((cid, row))
    return out


MORE = _more()
SUPER_NVFP4 = {"gb300": 9600, "gb200": 6784, "b300": 7424, "b200": 5632}  # tokens/s/GPU, archive lines 283-289
CASES = [KIMI] + [f"mbridge-26.04.01-{chip}-nemotron-3-super-64gpu-mxfp8" for chip, _ in ROWS] + [
    f"mbridge-26.04.01-{chip}-nemotron-3-super-64gpu-nvfp4" for chip in SUPER_NVFP4] + [c for c, _ in MORE]


def _ratio(case: str) -> float:
    """Measured / predicted step time of a MORE case (the measured step from the row's tokens/s/GPU)."""
    row = dict(MORE)[case]
    measured_ms = int(row["GBS"]) * int(row["Sequence Length"]) / (
        float(row["Tokens / sec / GPU"]) * int(row["#-GPUs"])) * 1000.0
    return measured_ms / predict_case(case).step_time_ms


def _hard_failures(case: str) -> list[str]:
    """The hard Critic checks the published configuration fails (as ``asap eval`` scores it)."""
    run = LocalRunStore(EVAL).get(case)
    mesh, _ = baseline_mesh(run, None)
    return [f"{c.name}: {c.reason}" for c in critique(run, mesh, settings=settings_for_run(run)).failures if c.hard]


def test_the_committed_cases_are_what_the_script_writes(tmp_path: Path) -> None:
    assert_script_writes("eval_cases_mbridge_260401", CASES, tmp_path)


@pytest.mark.parametrize("chip, tokens", ROWS)
def test_each_row_fits_and_is_priced_within_twenty_percent_of_its_throughput(chip: str, tokens: int) -> None:
    pred = predict_case(f"mbridge-26.04.01-{chip}-nemotron-3-super-64gpu-mxfp8")
    assert pred.fits_memory
    measured_ms = 512 * 8192 / (tokens * 64) * 1000.0
    assert 0.85 < measured_ms / pred.step_time_ms < 1.2


def test_the_three_expert_layouts_are_read_as_the_recipes_lay_them_out() -> None:
    """GB300: EP 64 in one NVLink domain; B300: EP 8 per node, data parallel over InfiniBand; B200: EP 64 across the
    eight nodes, its all-to-all crossing InfiniBand (the flex dispatcher sends a token once per destination node)."""
    gb300 = predict_case(CASES[1]).mesh
    b300 = predict_case(CASES[3]).mesh
    b200 = predict_case(CASES[4])
    assert gb300.size("expert") == 64 and not gb300.dcn
    assert b300.ici.get("expert") == 8 and b300.dcn.get("data") == 8
    assert b200.mesh.ici.get("expert") == 8 and b200.mesh.dcn.get("expert") == 8
    assert b200.breakdown_ms["comm.expert"] > 0
    assert any("once per destination node" in a for a in b200.assumptions)


def test_kimi_k2_runs_its_26_06_recipe_with_distributed_muon() -> None:
    """The same presets and helpers at 21d102f5e as at 8f341b04 (scripts/eval_cases_mbridge_2606.py): dist_muon
    without the distributed optimizer or fp8 gathers; within 20% of the published 5,328 tokens/s/GPU, untuned."""
    pred = predict_case(KIMI)
    assert pred.fits_memory and pred.breakdown_ms["optimizer_step"] > 0
    assert 0.85 < 4096 * 4096 / (5328 * 256) * 1000.0 / pred.step_time_ms < 1.2


def test_the_script_writes_21_more_rows_and_each_matches_its_preset() -> None:
    """Lines 201-203, 213-215, 225, 227-228, 234-237, 244-247, 254-257; the script checks each row's sizes and batch
    against the preset its recipe applies (PRESET_SIZES) before writing it."""
    assert len(MORE) == 21 and len({c for c, _ in MORE}) == 21
    assert sorted(n for lines in SCRIPT.MORE_ROWS.values() for n, _ in lines) == [
        201, 202, 203, 213, 214, 215, 225, 227, 228, 234, 235, 236, 237, 244, 245, 246, 247, 254, 255, 256, 257]


@pytest.mark.parametrize("case, row", MORE, ids=[c for c, _ in MORE])
def test_each_new_case_runs_its_rows_parallel_sizes_and_batch(case: str, row: dict[str, str]) -> None:
    doc = yaml.safe_load((EVAL / case / "megatron.yaml").read_text())
    model = doc["model"]
    assert model["tensor_model_parallel_size"] == int(row["TP"])
    assert model["pipeline_model_parallel_size"] == int(row["PP"])
    assert model["context_parallel_size"] == int(row["CP"])
    assert model.get("virtual_pipeline_model_parallel_size") == (None if row["VP"] == "n/a" else int(row["VP"]))
    assert model.get("expert_model_parallel_size") == (None if row["EP"] == "n/a" else int(row["EP"]))
    assert doc["train"] == {"micro_batch_size": int(row["MBS"]), "global_batch_size": int(row["GBS"])}
    assert model["seq_length"] == int(row["Sequence Length"])
    assert bool(doc.get("ddp", {}).get("use_megatron_fsdp")) == (int(row["FSDP"]) > 0)
    expected = yaml.safe_load((EVAL / case / "expected.yaml").read_text())
    assert expected["table"] == f"mbridge-26.04.01-{row['System'].lower()}"
    assert expected["measured"][0]["tokens_per_second_per_chip"] == float(row["Tokens / sec / GPU"])


@pytest.mark.parametrize("case", [c for c, _ in MORE if "llama" in c])
def test_the_gb300_llama_rows_pass_the_critic_within_twenty_percent(case: str) -> None:
    """Llama 3 70B (FSDP 64 with offloading / PP 4 x VP 5) and 3.1 405B (TP 4 PP 8 VP 4, TP 2 PP 8 CP 2 VP 4) on
    GB300 in FP8, MXFP8 and NVFP4: the published layouts pass every hard Critic check and are priced within 20%."""
    assert _hard_failures(case) == []
    assert 0.85 < _ratio(case) < 1.2


def test_llama3_70b_fp8_on_gb300_is_read_as_megatron_fsdp_with_twenty_offloaded_layers() -> None:
    """The V2 FP8 preset: Megatron-FSDP over all 64 GPUs (the FSDP column), optim_grads_params sharding priced as ZeRO
    stage 3, 20 of 80 layers' activations offloaded to the host."""
    run = LocalRunStore(EVAL).get("mbridge-26.04.01-gb300-llama3-70b-64gpu-fp8")
    settings = settings_for_run(run)
    assert settings is not None and settings.megatron_fsdp and settings.zero_stage == 3
    assert settings.activation_offload_layers == 20
    assert predict_case(run.record.id).mesh.size("data") == 64


def test_deepseek_v3_three_layouts_rank_as_measured() -> None:
    """GB300 (PP 2 x VP 8, EP 32, HybridEP) is the fastest step, then B300 (PP 8, EP 8 per node), then B200 (PP 8 x VP
    2, EP 32 across four nodes over DeepEP, its token dispatch read as once per destination node)."""
    cases = [f"mbridge-26.04.01-{chip}-deepseek-v3-256gpu-mxfp8" for chip in ("gb300", "b300", "b200")]
    preds = [predict_case(c) for c in cases]
    assert preds[0].step_time_ms < preds[1].step_time_ms < preds[2].step_time_ms
    assert any("once per destination node" in a for a in preds[2].assumptions)
    assert all(_hard_failures(c) == [] for c in cases)


@pytest.mark.parametrize("chip", ["gb300", "gb200", "b300", "b200"])
def test_gpt_oss_bf16_rows_are_priced_in_bf16_and_fit(chip: str) -> None:
    """GPT-OSS 120B in BF16 (EP 64 on the NVL72 systems, EP 8 per node on B300 / B200): no fp8 anywhere, and the
    published layout passes the Critic. On the 180 GB B200 that needs the gradients in the bf16 buffer the recipe
    reduces in (grad_reduce_in_fp32 False), not at its precision-aware optimizer's main_grads_dtype fp32: priced that
    way it was 185.8 GB and refused, though the row ran."""
    case = f"mbridge-26.04.01-{chip}-gpt-oss-120b-64gpu-bf16"
    run = LocalRunStore(EVAL).get(case)
    settings = settings_for_run(run)
    assert run.record.training is not None and run.record.training.dtype == "bf16"
    assert settings is not None and settings.fp8_recipe is None and not settings.fp8_params
    assert _hard_failures(case) == []


@pytest.mark.parametrize("chip", ["gb300", "gb200", "b300", "b200"])
def test_qwen3_30b_rows_fit_and_are_priced_within_ten_percent(chip: str) -> None:
    """Qwen3 30B-A3B on eight GPUs (EP 8, HybridEP, the V1 presets: the model has no V2)."""
    case = f"mbridge-26.04.01-{chip}-qwen3-30b-a3b-8gpu-mxfp8"
    assert _hard_failures(case) == []
    assert 0.9 < _ratio(case) < 1.1


def test_qwen3_235b_four_systems_rank_as_measured() -> None:
    """Measured step times rank GB300 (PP 4 x VP 12, EP 32) < B300 (PP 8, EP 8, MBS 2) < GB200 (PP 8 x VP 3) < B200
    (PP 8, EP 8, MBS 1, plain all-to-all dispatch); the predictions rank them the same, and all four fit."""
    cases = [f"mbridge-26.04.01-{chip}-qwen3-235b-a22b-256gpu-mxfp8" for chip in ("gb300", "b300", "gb200", "b200")]
    steps = [predict_case(c).step_time_ms for c in cases]
    assert steps == sorted(steps)
    assert all(_hard_failures(c) == [] for c in cases)


@pytest.mark.parametrize("chip", list(SUPER_NVFP4))
def test_super_nvfp4_rows_read_their_per_module_recipe_and_bf16_tail(chip: str) -> None:
    """Nemotron 3 Super's NVFP4 rows run te_quant.cfg (attention, LatentMoE projections and MTP in BF16, Mamba's
    out_proj in MXFP8) and keep the last 14 of 88 layers in BF16 (nemotron_3_super_bf16_with_nvfp4_mixed): both are
    read, the published layout fits, and the step is priced within 20% of the row (measured from its tokens/s/GPU;
    priced all-NVFP4 the GB200 row was 19% too fast)."""
    case = f"mbridge-26.04.01-{chip}-nemotron-3-super-64gpu-nvfp4"
    run = LocalRunStore(EVAL).get(case)
    settings = settings_for_run(run)
    assert settings is not None and settings.bf16_layers == (0, 14)
    assert settings.precision_rules is not None and len(settings.precision_rules) == 5
    pred = predict_case(case)
    assert any("attn_qkv 100% bf16" in a and "latent_fc1 100% bf16" in a for a in pred.assumptions)
    assert _hard_failures(case) == []
    measured_ms = 512 * 8192 / 64 / SUPER_NVFP4[chip] * 1e3
    assert 0.8 < measured_ms / pred.step_time_ms < 1.2
