"""DeepSpeed's ZeRO stage as a proposal lever, ZeRO's communication volumes, and ZeRO offload priced.

Real configs: ``tests/data/real/deepspeed`` (sources and licenses in ``tests/data/real/README.md``). Models: Llama 2
7B and 13B as published (Touvron et al. 2023, Table 1 / the released configs: 32 layers x 4096 and 40 x 5120).

Published facts asserted:
* ZeRO (Rajbhandari et al. 2019, arXiv:1910.02054) §7.2.1: ZeRO stages 1 and 2 move the same 2Ψ per step as data
  parallelism (a gradient reduce-scatter and a parameter all-gather replace the all-reduce); §7.2.2: stage 3 adds
  the parameter all-gather of forward and backward, 3Ψ, 1.5x.
* DeepSpeed ``deepspeed/runtime/engine.py`` ``allreduce_gradients``: "ZeRO stage >= 2 communicates during non
  gradient accumulation boundaries as well" (stage 1 only at the boundary).
* DeepSpeed ``deepspeed/runtime/pipe/engine.py``: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism".
* ZeRO-Offload (Ren et al. 2021) §4.1: per step the GPU sends 2 bytes of gradient per parameter to the host and
  receives 2 bytes of updated parameter back; §5.1 Table 2: CPU-Adam ~0.22 s per billion parameters.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.analysis.analyze import analyze_run
from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_changes, config_diff
from bot.configs.mesh import Mesh
from bot.errors import ConfigError
from bot.proposals import candidates
from bot.proposals.context import prepare
from bot.proposals.engine import propose, rules_for
from bot.proposals.moves import MEMORY_TIGHT_SHARE, SettingsMove, load_playbook, memory_state, rule_matches
from bot.proposals.settings import expand
from bot.runs.store import LocalRunStore
from knowledge.cost_core import DEFAULT_OVERLAP_MISS, evaluate
from knowledge.cost_offload import CPU_ADAM_PARAMS_PER_S, OFFLOAD_RANGE
from knowledge.cost_settings import settings_from_config
from knowledge.cost_shapes import resolve_shape
from knowledge.costmodel import DEFAULT_HEADROOM, mesh_arrays, predict
from knowledge.hardware import get_chip

REAL = Path(__file__).resolve().parent / "data" / "real" / "deepspeed"
LLAMA2_7B = "{name: llama2-7b, layers: 32, d_model: 4096, d_ff: 11008, heads: 32, kv_heads: 32, vocab: 32000}"
LLAMA2_13B = "{name: llama2-13b, layers: 40, d_model: 5120, d_ff: 13824, heads: 40, kv_heads: 40, vocab: 32000}"


def _run(root: Path, name: str, config_text: str, *, model: str = LLAMA2_7B, chip: str = "a100-80gb",
         chips: int = 64, slices: int = 8, batch: int = 512, seq: int = 4096):  # noqa: ANN202 - a Run
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "ds_config.json").write_text(config_text, encoding="utf-8")
    (folder / "run.yaml").write_text(
        f"id: '{name}'\nname: '{name}'\nframework: other\nchip: {chip}\nnum_chips: {chips}\nnum_slices: {slices}\n"
        f"config: ds_config.json\nprofile: []\nmodel: {model}\n"
        f"training: {{global_batch: {batch}, seq_len: {seq}, micro_batch: 1, remat: full}}\ntags: [config-only]\n",
        encoding="utf-8")
    return LocalRunStore(root).get(name)


def _text(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


def _stage(name: str, stage: int) -> str:
    text = _text(name)
    for old in range(4):
        text = text.replace(f'"stage": {old}', f'"stage": {stage}')
    return text


def _z3(stage: int, batch: int) -> str:
    """microsoft/DeepSpeed's torch.compile ZeRO-3 test config (bf16) at ``stage`` with ``batch`` sequences per step."""
    return _stage("ds_config_z3.json", stage).replace('"train_batch_size": 8', f'"train_batch_size": {batch}')


def _terms(run, mesh: Mesh):  # noqa: ANN001, ANN202 - the cost model's Terms for one mesh, the run's own settings
    settings = settings_from_config(load_config(run.folder / "ds_config.json"))
    ici, dcn = mesh_arrays([mesh])
    shape = resolve_shape(run.record, settings)
    return evaluate(shape, get_chip(run.record.chip), run.record.chips_per_slice, ici, dcn)


def _changed_lines(diff: str) -> list[str]:
    return [x for x in diff.splitlines() if x[:1] in "+-" and not x.startswith(("+++", "---"))]


# ---- ZeRO §7: communication volume per stage -------------------------------------------------------------------
def test_zero_stages_1_and_2_move_data_parallel_volume_and_stage_3_one_and_a_half(tmp_path: Path) -> None:
    data = Mesh(ici={"data": 8}, dcn={"data": 8})
    # one micro-batch per step (64 sequences on 64 GPUs): the setting ZeRO §7 counts
    comm = {s: float(_terms(_run(tmp_path, f"s{s}", _z3(s, 64), batch=64), data).comm_s["data"][0])
            for s in range(4)}
    assert comm[0] > 0
    assert comm[1] == pytest.approx(comm[0], rel=1e-9)  # §7.2.1: reduce-scatter + all-gather = all-reduce, 2Ψ
    assert comm[2] == pytest.approx(comm[0], rel=1e-9)
    # §7.2.2: 3Ψ over data ranks (Megatron-DeepSpeed), and per layer three collectives each paying NCCL's ring latency
    # over 64 GPUs on 8 nodes (8.4 + 56 x 3.4 + 7 x 14 us; knowledge.cost_network.ring_latency), none in stages 0-2
    ring = 3 * 32 * (8.4 + 56 * 3.4 + 7 * 14) * 1e-6  # Llama 2 7B's 32 layers
    assert comm[3] == pytest.approx(1.5 * comm[0] + ring, rel=1e-9)
    # a ds_config at stage 3 reads as the fsdp axis over the same GPUs: the same 3Ψ and latency, priced there
    fsdp = _terms(_run(tmp_path, "f3", _z3(3, 64), batch=64), Mesh(ici={"fsdp": 8}, dcn={"fsdp": 8}))
    assert float(fsdp.comm_s["fsdp"][0]) == pytest.approx(comm[3], rel=1e-9)


def test_zero2_reduce_scatters_at_every_micro_batch_and_zero1_once_per_step(tmp_path: Path) -> None:
    data = Mesh(ici={"data": 8}, dcn={"data": 8})
    one = {s: float(_terms(_run(tmp_path, f"a{s}", _z3(s, 64), batch=64), data).comm_s["data"][0])
           for s in (1, 2)}
    eight = {s: float(_terms(_run(tmp_path, f"b{s}", _z3(s, 512), batch=512), data).comm_s["data"][0])
             for s in (1, 2)}  # 512 sequences, micro-batch 1, 64 GPUs: 8 micro-batches per step
    assert eight[1] == pytest.approx(one[1], rel=1e-9)  # stage 1 reduces at the accumulation boundary only
    assert eight[2] == pytest.approx(one[2] * (8 + 1) / 2, rel=1e-9)  # 8 reduce-scatters + 1 all-gather vs 2


# ---- offload priced --------------------------------------------------------------------------------------------
def _offload_ms(run, mesh: Mesh):  # noqa: ANN001, ANN202
    settings = settings_from_config(load_config(run.folder / "ds_config.json"))
    return predict(run.record, mesh, settings=settings)


@pytest.mark.parametrize("chip", ["a100-80gb", "h100"])
def test_optimizer_offload_adds_params_over_the_host_link_and_the_cpu_step(tmp_path: Path, chip: str) -> None:
    # microsoft/DeepSpeed's Megatron GPT-2 test config: ZeRO-2, fp16, legacy "cpu_offload": true; 8 GPUs, one node
    mesh = Mesh(ici={"data": 8})
    text = _text("ds_config_func_bs8_zero2_offload.json")
    run = _run(tmp_path, "on", text, chip=chip, chips=8, slices=1, batch=8)
    on = _offload_ms(run, mesh)
    off = _offload_ms(_run(tmp_path, "off_", text.replace('"cpu_offload": true', '"cpu_offload": false'), chip=chip,
                           chips=8, slices=1, batch=8), mesh)
    psi = resolve_shape(run.record, None).params_total / 8  # each GPU's ZeRO-2 partition [ZeRO-Offload §4.2]
    bw = get_chip(chip).host_link_bandwidth
    assert bw == {"a100-80gb": 25e9, "h100": 50e9}[chip]  # PCIe Gen4 / Gen5 x16, one way
    # one micro-batch: 2 B/param of gradient down (hidden behind backward up to the overlap miss), 2 B/param of
    # updated parameters up and CPU-Adam over the host's 8 partitions on the critical path [ZeRO-Offload §4.1, §5.1]
    want = DEFAULT_OVERLAP_MISS * 2 * psi / bw + 2 * psi / bw + 8 * psi / CPU_ADAM_PARAMS_PER_S
    assert on.breakdown_ms["offload"] / 1e3 == pytest.approx(want, rel=1e-6)
    assert "offload" not in off.breakdown_ms
    assert on.step_time_ms - off.step_time_ms == pytest.approx(on.breakdown_ms["offload"], rel=1e-6)
    # the assumptions are named and the band widens for them
    said = " ".join(on.assumptions)
    assert f"{bw / 1e9:.0f} GB/s per direction" in said and "CPU-Adam" in said and "ZeRO-Offload" in said
    extra = on.breakdown_ms["offload"]
    assert "ZeRO offload" in analyze_run(run).diagnosis.summary  # `asap why` shows its share of the step
    assert on.step_time_high_ms - off.step_time_high_ms >= extra * OFFLOAD_RANGE
    assert (on.step_time_high_ms - on.step_time_low_ms) > (off.step_time_high_ms - off.step_time_low_ms) + extra


def test_offload_transfer_time_scales_with_params_over_host_bandwidth(tmp_path: Path) -> None:
    mesh = Mesh(ici={"data": 8})
    text = _text("ds_config_func_bs8_zero2_offload.json")
    parts = {}
    for chip in ("a100-80gb", "h100"):
        for name, model in (("7b", LLAMA2_7B), ("13b", LLAMA2_13B)):
            run = _run(tmp_path, f"{chip}-{name}", text, model=model, chip=chip, chips=8, slices=1, batch=8)
            ms = _offload_ms(run, mesh).breakdown_ms["offload"] / 1e3
            psi = resolve_shape(run.record, None).params_total / 8
            parts[chip, name] = (ms - 8 * psi / CPU_ADAM_PARAMS_PER_S, psi)  # the host-link part
    for name in ("7b", "13b"):  # twice the bandwidth, half the transfer time
        assert parts["h100", name][0] == pytest.approx(parts["a100-80gb", name][0] / 2, rel=1e-6)
    ratio = parts["a100-80gb", "13b"][1] / parts["a100-80gb", "7b"][1]
    assert parts["a100-80gb", "13b"][0] == pytest.approx(parts["a100-80gb", "7b"][0] * ratio, rel=1e-6)


def test_parameter_offload_fetches_every_forward_and_backward(tmp_path: Path) -> None:
    # transformers' ZeRO-3 test config: optimizer and parameters offloaded to CPU
    fsdp = Mesh(ici={"fsdp": 8})
    text = _text("hf_ds_config_zero3.json")
    run = _run(tmp_path, "both", text, chips=8, slices=1, batch=64)  # 64 sequences on 8 GPUs: 8 micro-batches
    both = _offload_ms(run, fsdp).breakdown_ms["offload"] / 1e3
    no_param = text.replace('"offload_param": {\n            "device": "cpu"', '"offload_param": {\n            "device": "none"')
    assert no_param != text
    opt_only = _offload_ms(_run(tmp_path, "opt", no_param, chips=8, slices=1, batch=64), fsdp).breakdown_ms["offload"]
    psi = resolve_shape(run.record, None).params_total / 8
    fetched = 8 * 2 * 2 * psi / get_chip("a100").host_link_bandwidth  # m x (forward + backward) x 2 B x partition
    # prefetched behind the (much longer) compute: only the overlap miss (as for collectives) shows
    assert both - opt_only / 1e3 == pytest.approx(DEFAULT_OVERLAP_MISS * fetched, rel=1e-6)


# ---- the stage lever -------------------------------------------------------------------------------------------
def test_stage_1_on_memory_tight_a100s_gets_a_1_to_2_proposal_that_edits_only_the_stage(tmp_path: Path) -> None:
    # the DeepSpeed autotuner's stage-1 template (fp32: 16 B/param) with Llama 2 13B on 64 A100-80GB: ZeRO-1 keeps
    # 8Ψ + 8Ψ/64 = 105 GB per GPU (out of memory), ZeRO-2 4Ψ + 12Ψ/64 = 54 GB [ZeRO §5, Figure 1]
    run = _run(tmp_path, "z1", _text("template_zero1.json"), model=LLAMA2_13B)
    report = analyze_run(run)
    ctx = prepare(run, report)
    assert ctx.memory == "tight" and not ctx.base_pred.fits_memory
    pset = propose(run, report, knowledge=False)
    up = [p for p in pset.proposals if p.kind == "zero-stage+"]
    assert len(up) == 1
    p = up[0]
    assert p.mesh == {"ici": {"data": 8}, "dcn": {"data": 8}} and p.settings == {"zero_stage": 2}
    assert _changed_lines(p.diff or "") == ['-    "stage": 1,', '+    "stage": 2,']
    assert p.predicted is not None and p.predicted.fits_memory
    assert p.predicted.memory_per_chip_bytes < 0.6 * ctx.base_pred.memory_per_chip_bytes
    # it states the memory and the step-time change the cost model predicts, with the ZeRO paper
    assert "ZeRO stage 1 -> 2" in p.rationale and "ZeRO §5, Figure 1" in p.rationale and "predicted step" in p.rationale
    assert f"{ctx.base_pred.memory_per_chip_bytes / 1e9:.1f} -> {p.predicted.memory_per_chip_bytes / 1e9:.1f} GB" \
        in p.rationale
    assert "arXiv:1910.02054" in p.rationale and p.move is not None and p.move.id == "zero-stage-up-memory-tight"
    assert any("every micro-batch" in t for t in p.tradeoffs)  # 8 micro-batches per step: ZeRO-2 sends more


def test_communication_bound_zero3_with_room_gets_a_3_to_2_proposal(tmp_path: Path) -> None:
    # microsoft/DeepSpeed's torch.compile ZeRO-3 test config (bf16) with Llama 2 7B on 64 GPUs (8 nodes), one
    # 512-token sequence per GPU: the parameter traffic, not the compute, sets the step
    run = _run(tmp_path, "z3", _z3(3, 64), batch=64, seq=512)
    report = analyze_run(run)
    assert report.diagnosis.bottleneck == "communication"
    pset = propose(run, report, knowledge=False)
    down = [p for p in pset.proposals if p.kind.endswith("zero-stage-")]
    assert len(down) == 1
    p = down[0]
    assert p.mesh == {"ici": {"data": 8}, "dcn": {"data": 8}}  # what ASAP reads a stage-2 ds_config as
    assert _changed_lines(p.diff or "") == ['-      "stage": 3,', '+      "stage": 2,']
    assert p.change.step_time_percent is not None and p.change.step_time_percent < 0
    assert "3Ψ per step against 2Ψ (§7.2.2)" in p.rationale
    assert p.predicted is not None and p.predicted.fits_memory


def test_a_lower_stage_that_saves_no_communication_is_not_a_candidate(tmp_path: Path) -> None:
    # ZeRO-2 -> 1 at one micro-batch per step: both move 2Ψ (§7.2.1), so it would only cost memory
    run = _run(tmp_path, "z2", _z3(2, 64), batch=64, seq=512)
    ctx = prepare(run, analyze_run(run))
    assert ctx.bottleneck == "communication" and ctx.memory == "room"
    rules = rules_for(ctx, load_playbook())
    assert "zero-stage-down-communication" in {r.id for r in rules}
    pool = candidates.build(ctx, rules).pool
    assert not [c for c in pool.items.values() if c.change.kind == "zero-stage-"]


def test_no_stage_2_with_pipeline_parallelism_in_megatron_deepspeed() -> None:
    # Megatron-DeepSpeed's Llama 2 example (TP 2, PP 2) at ZeRO stage 1: DeepSpeed's pipeline engine refuses 2
    text = _text("pretrain_llama2_distributed.sh").replace("ZERO_STAGE=0", "ZERO_STAGE=1")
    cfg = parse_config(text, str(REAL / "pretrain_llama2_distributed.sh"))
    settings = settings_from_config(cfg)
    base = cfg.mesh(16, 2)
    assert base.size("pipeline") == 2 and settings.zero_stage == 1

    def changes(direction: str, mesh: Mesh) -> list:  # noqa: ANN202
        return expand(SettingsMove(change="zero_stage", direction=direction), settings=settings, config=cfg,
                      framework="megatron", runyaml_remat=None, runyaml_micro_batch=None, global_batch=None,
                      data_parallel=4, base=mesh)

    assert changes("up", base) == [] and changes("down", base) == []  # stage 0 saves nothing over 1 (§7.2.1)
    flat = Mesh(ici={"tensor": 2, "data": 4}, dcn={"data": 2})  # without the pipeline, 1 -> 2 is allowed
    [up] = changes("up", flat)
    assert up.values == (("zero_stage", 2),) and up.only_mesh == flat and up.config_values == {"zero_stage": 2}


def test_memory_condition_matches_only_a_predicted_state() -> None:
    rule = next(r for r in load_playbook().rules if r.id == "zero-stage-up-memory-tight")
    args = {"bottleneck": "compute", "mesh": Mesh(ici={"data": 8}), "chip_family": "gpu", "num_slices": 1,
            "moe": False}
    assert rule_matches(rule, memory="tight", **args)
    assert not rule_matches(rule, memory="room", **args)
    assert not rule_matches(rule, memory=None, **args)  # model unknown: memory not predicted
    cap = get_chip("a100").hbm_bytes
    assert memory_state(0.85 * cap, cap) == "tight" and memory_state(0.5 * cap, cap) == "room"
    assert memory_state(None, cap) is None
    assert MEMORY_TIGHT_SHARE < 1 - DEFAULT_HEADROOM  # tight starts before the Critic's usable line


# ---- edits -----------------------------------------------------------------------------------------------------
def test_lowering_from_3_is_written_with_the_stage_and_a_mesh_that_needs_another_stage_is_refused() -> None:
    cfg = load_config(REAL / "template_zero3.json")
    data, fsdp = Mesh(ici={"data": 8}), Mesh(ici={"fsdp": 8})
    diff = config_diff(cfg, data, {"zero_stage": 2}, "ds_config.json")
    assert _changed_lines(diff) == ['-    "stage": 3,', '+    "stage": 2,']
    assert '"stage": 2,' in apply_changes(cfg, data, {"zero_stage": 2})
    with pytest.raises(ConfigError) as exc:
        config_diff(cfg, fsdp, {"zero_stage": 2}, "ds_config.json")  # stage 2 reads as data parallelism
    assert exc.value.field == "zero_optimization.stage" and "needs ZeRO stage 3" in exc.value.message
    with pytest.raises(ConfigError, match="lowering the ZeRO stage"):
        config_diff(cfg, data, None, "ds_config.json")  # a mesh change alone never lowers it


def test_a_stage_the_file_does_not_state_is_inserted() -> None:
    cfg = parse_config(_text("ds_config_func_bs4_zero1.json").replace('"stage": 1', '"reduce_scatter": true'),
                       "ds_config.json")
    diff = config_diff(cfg, Mesh(ici={"data": 4}), {"zero_stage": 1}, "ds_config.json")
    assert _changed_lines(diff) == ['+    "stage": 1,']
    assert '"zero_optimization": {\n    "stage": 1,\n    "reduce_scatter": true' in apply_changes(
        cfg, Mesh(ici={"data": 4}), {"zero_stage": 1})


def test_offload_on_a_chip_without_a_catalogued_host_link_says_it_is_not_priced(tmp_path: Path) -> None:
    assert get_chip("b200").host_link_bandwidth is None  # not in the catalog: no figure is invented for it
    run = _run(tmp_path, "b200", _text("ds_config_func_bs8_zero2_offload.json"), chip="b200", chips=8, slices=1,
               batch=8)
    pred = _offload_ms(run, Mesh(ici={"data": 8}))
    assert "offload" not in pred.breakdown_ms
    assert any("not priced" in a and "optimistic" in a for a in pred.assumptions)
