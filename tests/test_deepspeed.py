"""DeepSpeed configs on real files: the ds_config.json reader, Megatron-DeepSpeed launches (ds_config written by a
here-document), ZeRO memory in the cost model against the ZeRO paper's figures, `asap propose` raising the stage
where memory decides, and one-line errors for bad JSON.

Published figures used:
* ZeRO (Rajbhandari et al. 2019, arXiv:1910.02054) Figure 1 / §5: a 7.5B-parameter model on N_d = 64 GPUs with
  mixed-precision Adam (K = 12) holds 120 GB (baseline), 31.4 GB (P_os), 16.6 GB (P_os+g) and 1.88 GB (P_os+g+p)
  of model state per GPU.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.cli import main
from bot.configs import deepspeed
from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_mesh, apply_settings
from bot.configs.mesh import Mesh
from bot.errors import ConfigError
from bot.runs.store import LocalRunStore
from knowledge.cost_settings import settings_from_config, unknown_settings
from knowledge.cost_shapes import resolve_shape
from knowledge.costmodel import predict

REAL = Path(__file__).resolve().parent / "data" / "real" / "deepspeed"
GB = 1e9
LLAMA2_7B = "{name: llama2-7b, layers: 32, d_model: 4096, d_ff: 11008, heads: 32, kv_heads: 32, vocab: 32000}"


def _run(root: Path, name: str, config_text: str, *, model: str = LLAMA2_7B, chips: int = 64, slices: int = 8,
         config_name: str = "ds_config.json"):  # noqa: ANN202 - a bot.runs.store.Run
    folder = root / name
    folder.mkdir(parents=True)
    (folder / config_name).write_text(config_text, encoding="utf-8")
    (folder / "run.yaml").write_text(
        f"id: {name}\nname: {name}\nframework: other\nchip: a100-80gb\nnum_chips: {chips}\nnum_slices: {slices}\n"
        f"config: {config_name}\nprofile: []\nmodel: {model}\n"
        "training: {global_batch: 512, seq_len: 4096, micro_batch: 1, remat: full}\ntags: [config-only]\n",
        encoding="utf-8")
    return LocalRunStore(root).get(name)


def _text(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


# ---- reading -------------------------------------------------------------------------------------------------
def test_real_ds_configs_read_stage_precision_batch_and_offload() -> None:
    z1 = load_config(REAL / "ds_config_func_bs4_zero1.json")
    assert z1.format == "deepspeed" and z1.keys == []
    assert (z1.settings["zero_stage"], z1.settings["precision"], z1.settings["global_batch_size"]) == (1, "fp16", 4)
    z2 = load_config(REAL / "ds_config_func_bs8_zero2_offload.json")  # legacy "cpu_offload": true
    assert (z2.settings["zero_stage"], z2.settings["offload_optimizer"]) == (2, "cpu")
    assert any("cpu_offload" in n for n in z2.reading)
    z3 = load_config(REAL / "ds_config_z3.json")
    assert (z3.settings["zero_stage"], z3.settings["precision"]) == (3, "bf16")
    hf = load_config(REAL / "hf_ds_config_zero3.json")
    assert (hf.settings["offload_optimizer"], hf.settings["offload_param"]) == ("cpu", "cpu")
    s = settings_from_config(hf)
    assert s.deepspeed and s.zero_stage == 3 and s.optimizer_offload is True and s.param_offload is True
    fine = settings_from_config(load_config(REAL / "finetune_hf_llama_ds_config.json"))
    assert (fine.zero_stage, fine.micro_batch, fine.global_batch, fine.weight_dtype) == (0, 16, 256, "bf16")


def test_mesh_is_data_parallel_for_stages_0_to_2_and_fsdp_for_zero3() -> None:
    for stage in (0, 1, 2):
        assert load_config(REAL / f"template_zero{stage}.json").mesh(64, 8) == Mesh(ici={"data": 8}, dcn={"data": 8})
    z3 = load_config(REAL / "template_zero3.json")
    assert z3.mesh(64, 8) == Mesh(ici={"fsdp": 8}, dcn={"fsdp": 8})
    assert any("no tensor or pipeline" in n for n in z3.notes(64, 8))


def test_auto_values_are_unknown_not_errors() -> None:
    # the transformers ZeRO-3 config as the HF Trainer integration writes it: batch and stage left "auto"
    text = _text("hf_ds_config_zero3.json").replace('"stage": 3', '"stage": "auto"').replace(
        '"steps_per_print"', '"train_batch_size": "auto",\n    "steps_per_print"')
    cfg = parse_config(text, "ds_config.json")
    assert cfg.settings["zero_stage"] is None and cfg.settings["global_batch_size"] is None
    assert any('zero_optimization.stage is "auto"' in n for n in cfg.reading)
    s = settings_from_config(cfg)
    names = [u.name for u in unknown_settings(s, "other", "full")]
    assert "zero_stage" in names


@pytest.mark.parametrize("text, field, words", [
    (_text("template_zero1.json").replace('"stage": 1', '"stage": 7'), "zero_optimization.stage", "got 7 (line 3)"),
    (_text("ds_config_func_bs4_zero1.json").replace('"stage": 1', '"stage": 1,'), None, "not valid JSON"),
    (_text("ds_config_z3.json").replace('"enabled": true', '"enabled": "yes"'), "bf16.enabled", 'got "yes"'),
    (_text("hf_ds_config_zero3.json").replace('"device": "cpu"', '"device": "gpu"', 1),
     "zero_optimization.offload_optimizer.device", 'got "gpu"'),
    ('{"zero_optimization": ' * 40 + "{}" + "}" * 40, None, "nested deeper than 32"),
    ('{"train_batch_size": 8, "train_batch_size": 16}', "train_batch_size", "appears twice"),
    ('{"train_batch_size": 0}', "train_batch_size", "positive integer"),
])
def test_bad_json_is_one_clear_error_naming_file_and_key(text: str, field: str | None, words: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(text, "ds_config.json")
    assert exc.value.field == field and words in exc.value.message
    assert str(exc.value).startswith("ds_config.json:")


def test_huge_json_is_refused_before_parsing(tmp_path: Path) -> None:
    big = tmp_path / "ds_config.json"
    big.write_text('{"train_batch_size": 8, "pad": "' + "x" * (1 << 20) + '"}', encoding="utf-8")
    with pytest.raises(ConfigError, match="larger than 1,048,576 bytes"):
        load_config(big)


# ---- Megatron-DeepSpeed --------------------------------------------------------------------------------------
def test_megatron_deepspeed_launch_reads_the_heredoc_ds_config() -> None:
    cfg = load_config(REAL / "pretrain_llama2_distributed.sh")
    assert cfg.format == "megatron" and cfg.settings["deepspeed"] is True
    assert cfg.settings["zero_stage"] == 0 and cfg.mesh(16, 2).sizes()["tensor"] == 2
    assert any("here-document at line 67" in n for n in cfg.reading)
    s = settings_from_config(cfg)
    assert s.deepspeed and s.zero_stage == 0 and unknown_settings(s, "megatron", None) == []


def test_megatron_deepspeed_stage_follows_the_script_variable_and_edits_write_it() -> None:
    text = _text("pretrain_llama2_distributed.sh").replace("ZERO_STAGE=0", "ZERO_STAGE=1")
    cfg = parse_config(text, str(REAL / "pretrain_llama2_distributed.sh"))
    assert cfg.settings["zero_stage"] == 1
    new = apply_settings(cfg, {"zero_stage": 2})  # written where it wins: the ZERO_STAGE= line
    assert "ZERO_STAGE=2\n" in new and parse_config(new, cfg.source).settings["zero_stage"] == 2


def test_megatron_deepspeed_without_a_readable_stage_names_it_as_unknown() -> None:
    text = _text("pretrain_llama2_distributed.sh")
    text = re.sub(r"cat <<EOT.*?\nEOT\n", "", text, flags=re.S).replace('ds_args=" --zero-stage=$ZERO_STAGE ${ds_args}"', "")
    cfg = parse_config(text, str(REAL / "pretrain_llama2_distributed.sh"))
    assert cfg.settings["zero_stage"] is None
    assert any("not stated where ASAP can read it" in n for n in cfg.reading)
    unknowns = unknown_settings(settings_from_config(cfg), "megatron", None)
    assert [u.words for u in unknowns] == ["the DeepSpeed ZeRO stage"]


# ---- memory --------------------------------------------------------------------------------------------------
def _model_state(run, cfg) -> tuple[dict[str, float], float]:  # noqa: ANN001
    s = settings_from_config(cfg)
    mesh = cfg.mesh(run.record.num_chips, run.record.num_slices)
    pred = predict(run.record, mesh, settings=s)
    shape = resolve_shape(run.record, s)
    return pred.memory_breakdown_bytes, shape.params_total


def test_zero3_7b_on_64_a100_holds_16_psi_over_64_per_gpu(tmp_path: Path) -> None:
    run = _run(tmp_path, "z3", _text("template_zero3.json"))
    mem, psi = _model_state(run, load_config(run.folder / "ds_config.json"))
    # fp32 (the template enables neither bf16 nor fp16): 4 B weights + 4 B gradients + 8 B Adam moments = 16 B
    assert mem["gradients"] + mem["optimizer"] == pytest.approx(12 * psi / 64, rel=1e-6)
    gathered = mem["weights"] - 4 * psi / 64  # + the layers gathered for compute (current + prefetched)
    assert 0 < gathered < 2.5 * 2 * psi / 32  # about two bf16 layers of 32
    assert mem["weights"] + mem["gradients"] + mem["optimizer"] - gathered == pytest.approx(16 * psi / 64, rel=1e-6)


def test_zero_stages_order_memory_and_match_the_zero_paper(tmp_path: Path) -> None:
    model = "{name: zero-7.5b, layers: 32, d_model: 4096, heads: 32, params: 7.5e9}"
    base = _text("ds_config_z3.json")  # bf16 mixed precision, as in the paper (K = 12)
    totals = []
    paper = {0: 120 * GB, 1: 31.4 * GB, 2: 16.6 * GB, 3: 1.88 * GB}  # ZeRO Figure 1, Psi = 7.5B, N_d = 64
    for stage in (0, 1, 2, 3):
        text = base.replace('"stage": 3', f'"stage": {stage}')
        run = _run(tmp_path, f"s{stage}", text, model=model)
        mem, psi = _model_state(run, load_config(run.folder / "ds_config.json"))
        layer = 2.0 * 2.0 * (psi - 0) / 32 if stage == 3 else 0.0  # gathered bf16 layers (upper bound)
        state = mem["weights"] + mem["gradients"] + mem["optimizer"]
        assert paper[stage] <= state <= paper[stage] * 1.01 + layer, (stage, state / GB)
        totals.append(sum(mem.values()))
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 4


def test_optimizer_offload_takes_the_optimizer_out_of_hbm(tmp_path: Path) -> None:
    run = _run(tmp_path, "offload", _text("ds_config_func_bs8_zero2_offload.json"), chips=8, slices=1)
    mem, _ = _model_state(run, load_config(run.folder / "ds_config.json"))
    assert mem["optimizer"] == 0.0 and mem["gradients"] > 0


# ---- propose / why -------------------------------------------------------------------------------------------
def _cli(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    """``asap --runs-dir ROOT ARGS``: (exit code, stdout, stderr), as a person runs it."""
    code = 0
    try:
        main(["--runs-dir", str(root), *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_propose_on_zero0_7b_says_out_of_memory_and_writes_stage_3(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path, "z0", _text("template_zero0.json"))
    code, out, _ = _cli(capsys, tmp_path, "propose", "z0")
    assert code == 0
    assert "out of memory" in out  # fp32 7B without ZeRO: ~16 B x 6.7B = 108 GB of model state per GPU
    assert '-    "stage": 0\n+    "stage": 3' in out


def test_zero3_edit_inserts_the_stage_where_the_file_has_none() -> None:
    cfg = parse_config(_text("ds_config_func_bs4_zero1.json").replace('"stage": 1', '"reduce_scatter": true'),
                       "ds_config.json")
    assert deepspeed.stage_of(cfg) == 0
    new = apply_mesh(cfg, Mesh(ici={"fsdp": 8}))
    assert '"zero_optimization": {\n    "stage": 3,\n    "reduce_scatter": true' in new
    with pytest.raises(ConfigError, match="not data=4 tensor=2"):
        apply_mesh(cfg, Mesh(ici={"data": 4, "tensor": 2}))


def test_why_with_a_bad_stage_is_one_line_naming_file_and_key(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path, "bad", _text("template_zero1.json").replace('"stage": 1', '"stage": 7'))
    code, out, err = _cli(capsys, tmp_path, "why", "bad")
    assert code == 2 and "Traceback" not in out + err
    line = next(x for x in (out + err).splitlines() if "ds_config.json" in x)
    assert "zero_optimization.stage" in line and "got 7" in line
