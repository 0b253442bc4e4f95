"""The Blackwell, TPU7x and MI300-class catalog entries: the names users write, the fp4 peak, the NVL72 domain.

Figures and their vendor sources are in knowledge/data/hardware.yaml. The eval case priced at the end is
Megatron-Bridge's published GB200 row (docs/performance-summary-archive.md @ 067f987d, 25.11 container,
DGX-GB200, LLAMA3.1_405B: 813 tokens/s/GPU on 256 GPUs), in examples/eval.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.configs.mesh import Mesh
from bot.errors import AsapError, UnknownChip
from bot.runs.record import RunRecord
from bot.runs.store import LocalRunStore
from knowledge import costmodel
from knowledge.cost_network import axis_networks
from knowledge.cost_settings import settings_for_run
from knowledge.costmodel import mesh_arrays
from knowledge.hardware import (
    CATALOG_PATH,
    Chip,
    _normalize,
    fast_domain_chips,
    get_chip,
    known_chips,
    load_catalog,
)
from knowledge.meshsearch import placement_problems

EVAL = Path(__file__).resolve().parents[1] / "examples" / "eval"
TENSOR = 2  # bot.configs.mesh.AXES order: data, fsdp, tensor, sequence, expert, pipeline
EXPERT = 4


@pytest.mark.parametrize("name, key", [
    ("gb200", "gb200"), ("GB200 NVL72", "gb200"), ("DGX-GB200", "gb200"), ("NVIDIA GB200", "gb200"),
    ("b300", "b300"), ("DGX-B300", "b300"), ("NVIDIA B300 SXM6 AC", "b300"),
    ("gb300", "gb300"), ("GB300 NVL72", "gb300"), ("DGX-GB300", "gb300"),
    ("tpu7x", "tpu7x"), ("TPU7x", "tpu7x"), ("ironwood", "tpu7x"), ("v7", "tpu7x"), ("TPU v7x", "tpu7x"),
    ("mi300x", "mi300x"), ("AMD Instinct MI300X", "mi300x"), ("MI325X", "mi325x"),
    ("DGX-B200", "b200"), ("NVIDIA B200", "b200"), ("b200", "b200"),
    # the names that were there before still find their chips
    ("h100", "h100-sxm"), ("DGX-H100", "h100-sxm"), ("v5p", "tpu-v5p"), ("TPU v6e", "tpu-v6e"),
])
def test_the_names_people_write_find_the_chip(name: str, key: str) -> None:
    assert get_chip(name).key == key


@pytest.mark.parametrize("name, key", [
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"), ("a100_40gb", "a100-40gb"), ("A100 40GB", "a100-40gb"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"), ("a100_80gb", "a100-80gb"), ("a100", "a100-80gb"),
])
def test_an_a100_40gb_is_not_priced_as_the_80gb_part(name: str, key: str) -> None:
    """nvidia-smi's device names and llm-foundry's gpu column ('a100_40gb') find the 40 GB part: 40 GiB of HBM2 at
    1,555 GB/s, not 80 GiB of HBM2e at 2,039 (NVIDIA A100 datasheet); the same tensor cores and NVLink."""
    chip = get_chip(name)
    assert chip.key == key
    small, big = get_chip("a100-40gb"), get_chip("a100-80gb")
    assert small.hbm_bytes < 0.55 * big.hbm_bytes and small.hbm_bandwidth < 0.8 * big.hbm_bandwidth
    assert small.peak_bf16_flops == big.peak_bf16_flops and small.intra == big.intra


def test_a_b300_is_not_taken_for_a_gb300_nor_a_gb200_for_a_b200() -> None:
    """The rack and the 8-GPU board differ in NVLink domain: one must never answer for the other."""
    assert get_chip("b300").intra.max_domain_chips == 8 and get_chip("gb300").intra.max_domain_chips == 72
    assert get_chip("NVIDIA GB200").key == "gb200" and get_chip("NVIDIA B200").key == "b200"
    with pytest.raises(UnknownChip):
        get_chip("mi250x")


def test_no_catalog_name_belongs_to_two_chips() -> None:
    owner: dict[str, str] = {}
    for chip in known_chips():
        for name in {_normalize(n) for n in (chip.key, chip.display_name, *chip.aliases)}:
            assert owner.setdefault(name, chip.key) == chip.key, f"{name!r}: {owner[name]} and {chip.key}"


def test_a_catalog_whose_alias_collides_is_refused_naming_both_chips(tmp_path: Path) -> None:
    text = CATALOG_PATH.read_text(encoding="utf-8")
    bad = tmp_path / "hardware.yaml"
    bad.write_text(text.replace("aliases: [gb300-nvl72,", "aliases: [gb200, gb300-nvl72,"), encoding="utf-8")
    with pytest.raises(AsapError, match="'gb200' belongs to both gb200 and gb300"):
        load_catalog(bad)


def test_an_fp4_peak_is_there_only_where_a_vendor_publishes_one() -> None:
    fp4 = {c.key: c.peak_fp4_flops for c in known_chips() if c.peak_fp4_flops}
    # B300: the lowest of the published copies' dense figures (13.1 / 13.5 / 14 / 15 PFLOPS; catalog comment)
    assert fp4 == {"b200": 9.0e15, "gb200": 1.0e16, "gb300": 1.5e16, "b300": 13.1e15}
    assert get_chip("b200").peak_fp8_flops == 4.5e15  # was missing before


def _llama70b(chip: str, dtype: str) -> RunRecord:
    return RunRecord.model_validate({
        "id": "t", "chip": chip, "num_chips": 64, "framework": "megatron",
        "model": {"layers": 80, "d_model": 8192, "d_ff": 28672, "heads": 64, "kv_heads": 8, "vocab": 128256},
        "training": {"global_batch": 256, "seq_len": 8192, "micro_batch": 1, "dtype": dtype},
    })


def test_nvfp4_runs_at_the_fp4_peak_on_gb200_and_at_bf16_where_none_is_published() -> None:
    mesh = Mesh(ici={"tensor": 2, "data": 8, "pipeline": 4})
    compute = {(c, d): costmodel.predict(_llama70b(c, d), mesh).breakdown_ms["compute"]
               for c in ("gb200", "b300", "h100") for d in ("bf16", "fp8", "fp4")}
    assert compute[("gb200", "fp4")] < 0.8 * compute[("gb200", "fp8")] < 0.8 * compute[("gb200", "bf16")]
    assert compute[("b300", "fp4")] < 0.8 * compute[("b300", "fp8")]
    assert compute[("h100", "fp4")] == pytest.approx(compute[("h100", "bf16")])
    notes = costmodel.predict(_llama70b("gb200", "fp4"), mesh).assumptions
    assert any("dtype fp4 (NVFP4)" in a for a in notes)


def test_a_job_larger_than_a_rack_runs_as_equal_nvlink_domains_of_whole_trays() -> None:
    gb200, h100 = get_chip("gb200"), get_chip("h100")
    # Megatron-Bridge's launcher: <= 18-tray Slurm segments, the largest that divides the tray count
    assert [fast_domain_chips(gb200, n) for n in (8, 64, 72, 128, 144, 256, 1024)] == [8, 64, 72, 64, 72, 64, 64]
    assert [fast_domain_chips(h100, n) for n in (4, 8, 64, 1024)] == [4, 8, 8, 8]


def _networks(chip: Chip, axis: int, size: int):  # type: ignore[no-untyped-def]
    ici, dcn = mesh_arrays([Mesh(ici={"tensor" if axis == TENSOR else "expert": size, "data": 256 // size})])
    return axis_networks(chip, 256, ici, dcn)


@pytest.mark.parametrize("axis", [TENSOR, EXPERT])
@pytest.mark.parametrize("size", [16, 32, 64])
def test_tp_and_ep_up_to_64_stay_on_nvlink_on_gb200_and_cross_infiniband_on_h100(axis: int, size: int) -> None:
    gb = _networks(get_chip("gb200"), axis, size)
    assert gb.n_fast[0, axis] == size and gb.n_slow[0, axis] == 1
    assert gb.bw_fast[0, axis] == pytest.approx(9.0e11)  # NVLink 5, one way
    h = _networks(get_chip("h100"), axis, size)
    assert h.n_fast[0, axis] == 8 and h.n_slow[0, axis] == size // 8  # the rest over 400 Gb/s InfiniBand


def test_tensor_16_on_gb200_is_priced_over_nvlink_and_not_flagged() -> None:
    run = RunRecord.model_validate({
        "id": "t", "chip": "gb200", "num_chips": 256, "framework": "megatron",
        "model": {"layers": 126, "d_model": 16384, "d_ff": 53248, "heads": 128, "kv_heads": 8, "vocab": 128256},
        "training": {"global_batch": 1536, "seq_len": 8192, "micro_batch": 1, "dtype": "fp8"},
    })
    mesh = Mesh(ici={"tensor": 16, "data": 4, "pipeline": 4})
    assert placement_problems(run, mesh) == []
    as_h100 = run.model_copy(update={"chip": "h100"})
    assert any("does not fit the 8-GPU NVLink domain" in p for p in placement_problems(as_h100, mesh))
    gb = get_chip("gb200")
    rack_of_8 = gb.model_copy(update={"intra": gb.intra.model_copy(update={"max_domain_chips": 8,
                                                                           "chips_per_host": 8})})
    nvl72 = costmodel.predict(run, mesh).breakdown_ms
    boards = costmodel.predict(run, mesh, chip=rack_of_8).breakdown_ms
    assert nvl72["comm.tensor"] < 0.5 * boards["comm.tensor"]


def test_infinity_fabric_gives_a_pair_one_link_and_eight_gpus_seven() -> None:
    mi = get_chip("mi300x")
    ici, dcn = mesh_arrays([Mesh(ici={"tensor": 2, "data": 4}), Mesh(ici={"tensor": 8})])
    net = axis_networks(mi, 8, ici, dcn)
    assert np.allclose(net.bw_fast[:, TENSOR], [6.4e10, 7 * 6.4e10])


def test_ironwood_is_a_3d_torus_tpu_with_the_published_per_chip_figures() -> None:
    tpu = get_chip("ironwood")
    assert (tpu.family, tpu.intra.topology, tpu.intra.max_domain_chips) == ("tpu", "torus3d", 9216)
    assert (tpu.peak_bf16_flops, tpu.peak_fp8_flops, tpu.hbm_bandwidth) == (2.307e15, 4.614e15, 7.38e12)
    assert tpu.intra.link_bandwidth * tpu.intra.links_per_chip * 2 == pytest.approx(1.2e12)  # 1200 GB/s bidirectional


def test_megatron_bridge_gb200_405b_row_is_inside_the_predicted_band() -> None:
    """25.11, DGX-GB200, LLAMA3.1_405B, 256 GPUs, TP4 PP16 VP4, FP8-CS: 813 tokens/s/GPU."""
    run = LocalRunStore(EVAL).get("mbridge-25.11-gb200-llama31-405b-256gpu")
    measured_ms = 1536 * 8192 / (813 * 256) * 1e3
    mesh = Mesh(ici={"tensor": 4, "data": 4, "pipeline": 4}, dcn={"pipeline": 4})
    p = costmodel.predict(run.record, mesh, settings=settings_for_run(run))
    assert p.step_time_low_ms <= measured_ms <= p.step_time_high_ms
    assert abs(p.step_time_ms / measured_ms - 1) < 0.15


def test_a_gb200_run_whose_slices_are_trays_is_warned() -> None:
    # DGX GB200: 4-GPU compute trays, one 72-GPU NVLink domain per rack. num_slices counting trays would price
    # every tray as its own NVLink domain.
    from bot.analysis.analyze import slice_warnings
    from bot.runs.record import RunRecord

    trays = RunRecord(id="r", chip="gb200", num_chips=64, num_slices=16)
    [w] = slice_warnings(trays)
    assert "num_slices 16 gives 4" in w and "up to 72 chips" in w and "number of domains (racks)" in w
    assert slice_warnings(RunRecord(id="r", chip="gb200", num_chips=64, num_slices=1)) == []
    assert slice_warnings(RunRecord(id="r", chip="h100", num_chips=64, num_slices=8)) == []  # 8-GPU NVLink nodes
