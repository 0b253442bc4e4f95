"""Megatron-Bridge's run_config.yaml: the resolved ConfigContainer it writes next to every checkpoint.

Megatron-Bridge builds a run's config in Python (a recipe function plus ``key=value`` overrides), so the file a user
of it has is the YAML ``ConfigContainer.to_yaml`` writes: ``run_config.yaml`` in each checkpoint, the file
``logger.save_config_filepath`` names, and ``ConfigContainer.yaml`` from ``run_recipe.py --dry-run``. The fixtures
(tests/data/real/megatron_bridge/run_config, provenance in tests/data/real/README.md) are that call's output at
Megatron-Bridge 067f987d for three H100 recipes:

* ``llama3_70b_pretrain_32gpu_h100_bf16``: the builder-backed model config of August 2026 (#5132), whose
  parallel sizes and layer shapes sit under ``model.transformer:``;
* ``qwen3_30b_a3b_pretrain_8gpu_h100_bf16``: a provider-style MoE model, sizes directly under ``model:``;
* ``qwen3_30b_a3b_pretrain_16gpu_h100_bf16`` from ``perf_recipes``: the configuration behind the 26.04.01 DGX-H100
  performance table's Qwen3 30B-A3B row (eval case mbridge-26.04.01-h100-qwen3-30b-a3b-16gpu).

Every one of them repeats a parallel size outside the model (``dataset.context_parallel_size`` pads packed
sequences, ``tokenizer.tensor_model_parallel_size`` pads the vocabulary), and ASAP refused all three with
"context_parallel_size appears 2 times".
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.proposals  # noqa: F401  (registers propose)
from bot.cli import cli
from bot.configs.detect import load_config
from bot.configs.megatron import mesh
from bot.configs.mesh import Mesh
from bot.errors import ConfigError
from knowledge.cost_settings import settings_from_config

sys.path.insert(0, str(Path(__file__).parent))
from published_cases import EVAL  # noqa: E402

RUN_CONFIGS = Path(__file__).parent / "data" / "real" / "megatron_bridge" / "run_config"
LLAMA = RUN_CONFIGS / "llama3_70b_pretrain_32gpu_h100_bf16.yaml"
QWEN = RUN_CONFIGS / "qwen3_30b_a3b_pretrain_8gpu_h100_bf16.yaml"
QWEN_PERF = RUN_CONFIGS / "qwen3_30b_a3b_pretrain_16gpu_h100_bf16.perf.yaml"


def test_a_builder_backed_llama_run_config_reads_the_sizes_under_model_transformer() -> None:
    """The recipe: TP 4, PP 4 with 5 virtual stages, CP 2, sequence parallelism and TP overlap, 8,192 tokens, global
    batch 512, on 32 GPUs (4 nodes of 8)."""
    cfg = load_config(LLAMA)
    assert {k.path: k.value for k in cfg.keys}["model.transformer.tensor_model_parallel_size"] == 4
    assert mesh(cfg, 32, 4) == Mesh(ici={"tensor": 4, "sequence": 2}, dcn={"pipeline": 4})
    s = settings_from_config(cfg)
    assert (s.virtual_pipeline, s.sequence_parallel, s.tp_comm_overlap) == (5, True, True)
    assert (s.seq_len, s.micro_batch, s.global_batch) == (8192, 1, 512)
    dims = s.model_dims
    assert dims is not None
    assert (dims.layers, dims.d_model, dims.d_ff, dims.heads, dims.kv_heads) == (80, 8192, 28672, 64, 8)


def test_a_provider_style_moe_run_config_is_read_with_its_recompute_and_experts() -> None:
    cfg = load_config(QWEN)
    sizes = {k.key: k.value for k in cfg.keys}
    assert (sizes["tensor_model_parallel_size"], sizes["pipeline_model_parallel_size"],
            sizes["expert_model_parallel_size"]) == (4, 2, 4)
    s = settings_from_config(cfg)
    assert (s.remat_policy, s.recompute_method, s.recompute_num_layers) == ("full", "uniform", 1)
    assert (s.micro_batch, s.global_batch, s.seq_len) == (2, 32, 4096)
    dims = s.model_dims
    assert dims is not None
    assert (dims.layers, dims.experts, dims.experts_per_token, dims.d_ff) == (48, 128, 8, 768)


def test_the_perf_recipes_run_config_reads_as_the_published_rows_configuration() -> None:
    """The dry run of the performance recipe behind the 26.04.01 DGX-H100 row reads to the mesh and batch the
    eval case (written from the published table and the perf matrix) states."""
    cfg = load_config(QWEN_PERF)
    case = load_config(EVAL / "mbridge-26.04.01-h100-qwen3-30b-a3b-16gpu" / "megatron.yaml")
    assert mesh(cfg, 16, 2) == mesh(case, 16, 2) == Mesh(ici={"expert": 8}, dcn={"expert": 2})
    s, c = settings_from_config(cfg), settings_from_config(case)
    assert (s.global_batch, s.micro_batch, s.seq_len) == (c.global_batch, c.micro_batch, c.seq_len) == (1024, 1, 4096)
    assert s.ep_node_dedup is True  # moe_token_dispatcher_type flex (HybridEP): a token crosses nodes once


def _model_section_lines(text: str) -> range:
    """The lines (1-based) of the top-level ``model:`` mapping."""
    lines = text.splitlines()
    start = lines.index("model:") + 1
    end = next(i for i in range(start, len(lines)) if lines[i][:1] not in (" ", ""))
    return range(start + 1, end + 1)


def test_asap_proposes_on_a_run_config_and_edits_the_models_own_keys(tmp_path: Path) -> None:
    run = tmp_path / "llama70b"
    run.mkdir()
    shutil.copy(LLAMA, run / "run_config.yaml")
    (run / "run.yaml").write_text("id: llama70b\nchip: h100\nnum_chips: 32\nnum_slices: 4\nconfig: run_config.yaml\n")
    out = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path), "propose", "llama70b", "--json"])
    assert out.exit_code == 0, out.output
    answer = json.loads(out.output)
    assert answer["baseline"]["mesh"] == {"ici": {"tensor": 4, "sequence": 2}, "dcn": {"pipeline": 4}}
    model = _model_section_lines(LLAMA.read_text())
    diffs = [p["diff"] for p in answer["proposals"] if p.get("diff")]
    assert diffs
    for diff in diffs:  # each edit lands on model.transformer's keys, never on the dataset's or tokenizer's copies
        hunks = [int(line.split()[1].split(",")[0].lstrip("-")) for line in diff.splitlines() if line.startswith("@@")]
        assert hunks and all(h + 3 in model for h in hunks), diff


def test_the_data_loaders_sequence_length_wins_over_the_models(tmp_path: Path) -> None:
    """Megatron-Bridge 067f987d refuses a run whose dataset.seq_length differs from model.seq_length, but its 2025
    releases ran them (dataset.sequence_length 1024 under a Llama 3.1 provider's model.seq_length 131072 in a public
    25.09-container log, github.com/verdimrc/playground-nemo-2.0-gh 05-byoc-te-mb). The samples have the data
    loader's length; pricing the model's made ASAP predict a 1,317 s step and 269 GB per GPU for a 1B model."""
    text = LLAMA.read_text()
    assert "  seq_length: 8192\n" in text
    old = tmp_path / "run_config.yaml"
    old.write_text(text.replace("dataset:\n", "dataset:\n  sequence_length: 1024\n", 1)
                   .replace("  seq_length: 8192\n  sequence_parallel_size", "  sequence_parallel_size", 1))
    s = settings_from_config(load_config(old))
    assert s.seq_len == 1024
    assert s.model_dims is not None and s.model_dims.seq_len == 1024
    assert any("model.seq_length 8192" in n and "dataset.sequence_length 1024" in n for n in s.model_dims.notes)


def test_a_distillation_config_is_refused_naming_the_teacher() -> None:
    """Megatron-Bridge's own distillation override (examples/distillation/llama/conf, 067f987d) states the teacher's
    sizes under model.teacher. ASAP prices one model's step, not a student beside a teacher's forward pass; it used to
    answer "tensor_model_parallel_size appears 2 times ... remove the duplicates", which sent the user the wrong way."""
    with pytest.raises(ConfigError, match="knowledge-distillation") as info:
        load_config(RUN_CONFIGS.parent / "llama32_3b-1b_distill_override_example.yaml")
    assert info.value.field == "model.teacher"
    assert "appears 2 times" not in str(info.value)
