"""The model read from the run's own config (bot/configs/model_dims.py), on real public launch files.

A run.yaml with only chip / num_chips / config gets step-time and memory predictions from the model its
Megatron launch or MaxText recipe states; run.yaml's own model values still win, and disagreements are named.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.proposals  # noqa: F401  (registers propose)
from bot.cli import cli
from bot.configs.detect import load_config, parse_config
from bot.configs.model_dims import read_model_dims
from bot.runs.record import RunRecord
from knowledge.cost_model_source import config_model
from knowledge.cost_settings import settings_from_config
from knowledge.cost_shapes import missing_for_prediction, resolve_shape

REAL = Path(__file__).parent / "data" / "real"
MEGATRON = REAL / "megatron"
MAXTEXT = REAL / "maxtext" / "current" / "src" / "maxtext" / "configs"


def _record(**extra: object) -> RunRecord:
    return RunRecord(**{"id": "r", "chip": "h100", "num_chips": 1024, "num_slices": 128, **extra})


def test_gpt3_175b_megatron_script_counts_gpt3_parameters_with_gelu_mlp() -> None:
    cfg = load_config(MEGATRON / "train_gpt3_175b_distributed.sh")
    settings = settings_from_config(cfg)
    shape = resolve_shape(_record(), settings)
    # 96 layers x 12 x 12288^2: GPT-3's 175B less its (unknown-vocabulary) embedding; not 232B (SwiGLU count)
    assert 173.5e9 < shape.params_total < 176e9
    assert (shape.layers, shape.d_model, shape.d_ff, shape.heads, shape.mlp_matrices) == (96, 12288, 49152, 96, 2)
    text = " ".join(shape.assumptions)
    assert "model from the config train_gpt3_175b_distributed.sh" in text
    assert "Megatron's default GeLU" in text and "4 x hidden_size" in text
    assert "vocab not given" in text  # the script names only a vocab file: the embedding is left out, said so


def test_mixtral_megatron_script_is_8_experts_top2_with_gqa() -> None:
    dims = read_model_dims(load_config(MEGATRON / "train_mixtral_8x7b_distributed.sh"))
    assert dims is not None
    assert (dims.experts, dims.experts_per_token, dims.kv_heads, dims.d_ff, dims.mlp_matrices) == (8, 2, 8, 14336, 3)
    assert dims.origin["experts_per_token"].startswith("--moe-router-topk")
    # only --tokenizer-type Llama2Tokenizer names the vocabulary: that tokenizer's 32,000 tokens (TP 1: no padding)
    assert dims.vocab == 32000 and "Llama2Tokenizer has 32,000 tokens" in dims.origin["vocab"]


def test_nemo_launcher_yaml_evaluates_its_ffn_expression() -> None:
    dims = read_model_dims(load_config(REAL / "nemo" / "gpt3_5b.yaml"))
    assert dims is not None
    assert (dims.layers, dims.d_model, dims.d_ff, dims.heads, dims.mlp_matrices) == (24, 4096, 16384, 32, 2)
    assert "multiply" in dims.origin["d_ff"]


def test_maxtext_128b_scales_the_default_model_as_maxtext_pyconfig_does() -> None:
    dims = read_model_dims(load_config(MAXTEXT / "tpu" / "v5p" / "128b.sh"))
    assert dims is not None
    # base.yml: emb 2048, heads 16, mlp 7168, layers 16; global_parameter_scale=128 = 2^7 -> q=2, r=1:
    # heads/mlp x8, emb x4, layers x4 (MaxText get_individual_scales); head_dim 128 unscaled
    assert (dims.d_model, dims.heads, dims.kv_heads, dims.d_ff, dims.layers, dims.head_dim) == (
        8192, 128, 128, 57344, 64, 128)
    assert dims.mlp_matrices == 3 and dims.vocab == 32000
    assert "x8 by global_parameter_scale 128" in dims.origin["heads"]


def test_maxtext_model_name_reads_maxtexts_model_file() -> None:
    dims = read_model_dims(load_config(MAXTEXT / "tpu" / "v6e" / "mixtral_8x7b.sh"))
    assert dims is not None
    assert (dims.experts, dims.experts_per_token, dims.kv_heads, dims.d_ff, dims.vocab) == (8, 2, 8, 14336, 32000)
    assert "models/mixtral-8x7b.yml" in dims.origin["experts"]
    gpt3 = read_model_dims(load_config(MAXTEXT / "tpu" / "v5p" / "gpt3_175b" / "v5p_1024.sh"))
    assert gpt3 is not None and gpt3.mlp_matrices == 2 and gpt3.vocab == 50304  # mlp_activations ["gelu"]


def test_command_line_override_wins_over_the_model_file() -> None:
    cfg = parse_config("base_config: base.yml\nici_fsdp_parallelism: -1\n", str(MAXTEXT / "x.yml"),
                       path=MAXTEXT / "x.yml", command="python3 -m maxtext.train x.yml model_name=llama2-7b "
                       "base_num_decoder_layers=4")
    dims = read_model_dims(cfg)
    assert dims is not None and dims.layers == 4 and dims.d_model == 4096



def test_gemma2_counts_both_layers_of_each_merged_decoder_layer() -> None:
    """MaxText's models/gemma2-9b.yml says base_num_decoder_layers 21, "half of the real number of layers because we
    merge [local_attention, global_attention] into one layer": Gemma 2 9B has 42 transformer layers."""
    cfg = parse_config("base_config: base.yml\nici_fsdp_parallelism: -1\nmodel_name: gemma2-9b\n", str(MAXTEXT / "x.yml"),
                       path=MAXTEXT / "x.yml")
    dims = read_model_dims(cfg)
    assert dims is not None and dims.layers == 42 and (dims.d_model, dims.heads, dims.kv_heads) == (3584, 16, 8)
    assert "each gemma2 decoder layer holds 2 transformer layers" in dims.origin["layers"]


def test_tied_embeddings_are_counted_once() -> None:
    """Gemma 2 ties its output layer to the input embedding (MaxText models/gemma2-9b.yml logits_via_embedding:
    true): 256,128 x 3,584 counted once, the published ~9.24B parameters, not 10.2B. Megatron ties them unless
    --untie-embeddings-and-output-weights (its GPT-3 example: tied; its Mixtral example passes the flag: untied)."""
    gemma = read_model_dims(parse_config("base_config: base.yml\nici_fsdp_parallelism: -1\nmodel_name: gemma2-9b\n",
                                         str(MAXTEXT / "x.yml"), path=MAXTEXT / "x.yml"))
    assert gemma is not None and gemma.tied_embeddings is True
    assert "logits_via_embedding" in gemma.origin["tied_embeddings"]
    dims = {k: v for k, v in gemma.stated().items() if k != "seq_len"}
    spec = RunRecord(id="g", chip="tpu-v6e", num_chips=256, model=dims).model  # type: ignore[arg-type]
    assert spec is not None and 9.1e9 < (spec.derived_params() or 0) < 9.35e9
    gpt3 = read_model_dims(load_config(MEGATRON / "train_gpt3_175b_distributed.sh"))
    mixtral = read_model_dims(load_config(MEGATRON / "train_mixtral_8x7b_distributed.sh"))
    assert gpt3 is not None and gpt3.tied_embeddings is True
    assert mixtral is not None and mixtral.tied_embeddings is False

def test_unknown_model_name_is_named_and_prediction_refuses() -> None:
    cfg = parse_config("ici_fsdp_parallelism: -1\nmodel_name: nope\n", "cfg.yml")
    settings = settings_from_config(cfg)
    assert settings.model_dims is not None
    assert "model_name 'nope' names no MaxText model file" in settings.model_dims.problems[0]
    missing = missing_for_prediction(_record(training={"global_batch": 8, "seq_len": 128}), settings)
    assert missing and "model (" in missing[0] and "'nope'" in missing[0]


def test_run_yaml_wins_and_the_disagreement_is_named() -> None:
    settings = settings_from_config(load_config(MEGATRON / "train_gpt3_175b_distributed.sh"))
    record = _record(model={"layers": 96, "d_model": 12288, "heads": 96, "d_ff": 40000})
    cm = config_model(record, settings)
    assert cm.record.model is not None and cm.record.model.d_ff == 40000
    assert cm.record.model.mlp_matrices == 2  # not stated in run.yaml: the config's plain GeLU MLP
    assert any("run.yaml says d_ff 40000, the config 49152" in n and "using run.yaml" in n for n in cm.notes)


def test_propose_on_a_run_yaml_with_only_chip_and_config(tmp_path: Path) -> None:
    run = tmp_path / "gpt3"
    run.mkdir()
    shutil.copy(MEGATRON / "train_gpt3_175b_distributed.sh", run / "train.sh")
    (run / "run.yaml").write_text("id: gpt3\nchip: h100\nnum_chips: 1024\nnum_slices: 128\nconfig: train.sh\n")
    out = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path), "propose", "gpt3", "--json", "--no-diff"])
    assert out.exit_code == 0, out.output
    answer = json.loads(out.output)
    first = answer["proposals"][0]["predicted"]
    assert first["step_time_ms"] > 0 and first["memory_per_chip_bytes"] > 0
    assert any(n.startswith("model from the config train.sh") for n in answer["notes"])
    assert all(p["mesh"].get("ici", {}).get("expert", 1) == 1 for p in answer["proposals"])  # dense: no experts
    why = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path), "why", "gpt3", "--json"])
    assert why.exit_code == 0, why.output
    report = json.loads(why.output)
    assert report["kpis"]["model_source"] == "config train.sh"
    assert 173.5e9 < report["run"]["params"] < 176e9


def test_unknown_model_name_propose_says_what_is_missing_without_traceback(tmp_path: Path) -> None:
    run = tmp_path / "mt"
    run.mkdir()
    (run / "cfg.yml").write_text("ici_fsdp_parallelism: -1\nmodel_name: nope\nper_device_batch_size: 1\n"
                                 "max_target_length: 2048\n")
    (run / "run.yaml").write_text("id: mt\nchip: tpu-v5p\nnum_chips: 8\nconfig: cfg.yml\n")
    out = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path), "why", "mt"])
    from bot.errors import AsapError

    assert isinstance(out.exception, AsapError)  # main() prints it as one message, no traceback
    text = out.exception.render()
    assert "model_name 'nope' names no MaxText model file" in text and "the model is unknown" in text



def test_sliding_window_layers_attend_to_their_window_in_flops_and_mfu(tmp_path: Path) -> None:
    # MaxText's Gemma 2 9B (models/gemma2-9b.yml: sliding_window_size 4096, decoder_block gemma2 = local then global)
    # at 8192 tokens: half the layers attend to 4096 keys, so attention FLOPs are 3/4 of global attention's.
    from bot.analysis.kpis import model_flops_per_step
    from bot.runs.record import ModelSpec, TrainingSpec

    cfg = parse_config("base_config: base.yml\nici_fsdp_parallelism: -1\n", str(MAXTEXT / "x.yml"),
                       path=MAXTEXT / "x.yml", command="python3 -m maxtext.train x.yml model_name=gemma2-9b")
    dims = read_model_dims(cfg)
    assert dims is not None and (dims.sliding_window, dims.global_every) == (4096, 2)
    assert "gemma2 decoder's attention pattern" in dims.origin["global_every"]
    m = ModelSpec(layers=42, d_model=3584, d_ff=14336, heads=16, kv_heads=8, head_dim=256, vocab=256000)
    local = m.model_copy(update={"sliding_window": 4096, "global_every": 2})
    assert local.attention_keys(8192) == pytest.approx(0.75 * 8192, rel=0.01)
    assert m.model_copy(update={"sliding_window": 4096}).attention_keys(8192) == 4096  # Mistral: every layer local
    t = TrainingSpec(global_batch=8, seq_len=8192)
    full = model_flops_per_step(_record(model=m, training=t)).per_step
    windowed = model_flops_per_step(_record(model=local, training=t)).per_step
    assert full is not None and windowed is not None
    attention_full = 12 * 42 * 8192 * 16 * 256 * 8 * 8192
    assert full - windowed == pytest.approx(attention_full / 4, rel=0.02)


def test_megatron_window_flags_are_read(tmp_path: Path) -> None:
    sh = tmp_path / "train.sh"
    sh.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 36 --hidden-size 2880 "
                  "--num-attention-heads 64 --window-size '(128,0)' --window-attn-skip-freq 2 --seq-length 4096\n")
    dims = read_model_dims(load_config(sh, root=tmp_path))
    assert (dims.sliding_window, dims.global_every) == (128, 2)


def test_a_framework_default_does_not_contradict_run_yaml() -> None:
    """Megatron-Bridge 26.08's Qwen3 30B-A3B case (examples/eval) states no activation in its megatron.yaml: the
    recipe's model provider sets the gated SwiGLU MLP in code. run.yaml says 3 matrices. Megatron's GeLU default (2)
    only fills a gap; it is not the config saying 2, so no disagreement is named. A config that does say it is."""
    case = Path(__file__).resolve().parents[1] / "examples" / "eval" / "mbridge-26.08-gb300-qwen3-30b-a3b-8gpu-mxfp8"
    from bot.runs.store import LocalRunStore
    from knowledge.cost_settings import settings_for_run

    run = LocalRunStore(case.parent).get(case.name)
    settings = settings_for_run(run)
    assert settings is not None and settings.model_dims is not None
    assert "mlp_matrices" in settings.model_dims.defaulted
    cm = config_model(run.record, settings)
    assert not any("mlp_matrices" in n for n in cm.notes)
    stated = settings_from_config(parse_config(
        (case / "megatron.yaml").read_text().replace("model:\n", "model:\n  gated_linear_unit: false\n", 1),
        str(case / "megatron.yaml")))
    assert any("run.yaml says mlp_matrices 3, the config 2" in n for n in config_model(run.record, stated).notes)


def test_the_config_readers_guess_about_a_field_run_yaml_states_is_not_shown() -> None:
    """Megatron-Bridge 26.08's DeepSeek-V3 case: its megatron.yaml states no activation (the provider sets SwiGLU in
    code) and run.yaml says mlp_matrices 3, which is what is priced. The reader's "Megatron's default GeLU, 2 weight
    matrices" note is about that same field, so the answer must not say it (it read as the model being priced as GeLU).
    """
    case = Path(__file__).resolve().parents[1] / "examples" / "eval" / "mbridge-26.08-gb200-deepseek-v3-256gpu-mxfp8"
    from bot.runs.store import LocalRunStore
    from knowledge.cost_settings import settings_for_run

    run = LocalRunStore(case.parent).get(case.name)
    settings = settings_for_run(run)
    assert settings is not None and settings.model_dims is not None
    assert any("Megatron's default GeLU" in n for n in settings.model_dims.notes)  # the reader did guess
    shape = resolve_shape(run.record, settings)
    assert shape.mlp_matrices == 3
    assert not any("GeLU" in a for a in shape.assumptions)
