"""The bundled sample runs: valid records, configs whose mesh fits the run, readable profiles, a
deterministic generator, and files that actually show the bottleneck examples/runs/README.md promises."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.runs.store import LocalRunStore, load_run_file
from knowledge.hardware import get_chip

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "examples" / "runs"
SCRIPT = REPO / "scripts" / "make_sample_runs.py"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_sample_runs", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_sample_runs", module)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
IDS = [sc.id for sc in GEN.SCENARIOS]


def _table(obj: Any, first_col: str) -> dict[str, Any]:
    tables = obj if isinstance(obj, list) else [obj]
    for t in tables:
        if t and t.get("cols") and t["cols"][0]["id"] == first_col:
            return t
    raise AssertionError(f"no table starting with column {first_col!r}")


def _records(table: dict[str, Any]) -> list[dict[str, Any]]:
    ids = [c["id"] for c in table["cols"]]
    out = []
    for row in table["rows"]:
        assert len(row["c"]) == len(ids), "every row has one cell per column"
        out.append({k: cell["v"] for k, cell in zip(ids, row["c"], strict=True)})
    return out


def _load(run_id: str, name: str) -> Any:
    return json.loads((RUNS / run_id / name).read_text(encoding="utf-8"))


def _hlo(run_id: str) -> list[dict[str, Any]]:
    return _records(_load(run_id, "hlo_stats.json"))


def _share(rows: list[dict[str, Any]], pred: Any) -> float:
    total = sum(r["total_self_time"] for r in rows)
    return sum(r["total_self_time"] for r in rows if pred(r)) / total


COLLECTIVES = {"all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute"}


# --------------------------------------------------------------------------------------------- records
def test_there_are_at_least_six_generated_runs_across_tpu_and_gpu() -> None:
    families = {get_chip(sc.chip).family for sc in GEN.SCENARIOS}
    assert len(IDS) >= 6 and families == {"tpu", "gpu"}
    assert all(sc.id.isdigit() for sc in GEN.SCENARIOS), "IDs people type: short numbers"


@pytest.mark.parametrize("run_id", IDS)
def test_run_yaml_validates_and_id_matches_folder(run_id: str) -> None:
    record = load_run_file(RUNS / run_id / "run.yaml")
    assert record.id == run_id
    get_chip(record.chip)  # a catalog chip
    assert record.description and record.name
    run = LocalRunStore(RUNS).get(f"job {run_id}")  # the store's own id == folder check
    for rel in [record.config, *(record.profile or [])]:
        assert rel and run.path(rel, field="profile").is_file(), rel


def test_every_sample_folder_is_small() -> None:
    for run_id in IDS:
        size = sum(p.stat().st_size for p in (RUNS / run_id).rglob("*") if p.is_file())
        assert size < 300_000, f"{run_id} is {size} bytes"


def test_unknown_model_run_has_only_chip_mesh_and_profile() -> None:
    unknown = [sc.id for sc in GEN.SCENARIOS if not sc.model_known]
    assert unknown
    for run_id in unknown:
        record = load_run_file(RUNS / run_id / "run.yaml")
        assert record.model is None and record.training is None and record.measured is None
        assert record.config and record.profile


# --------------------------------------------------------------------------------------------- configs
@pytest.mark.parametrize("run_id", IDS)
def test_config_mesh_multiplies_to_num_chips(run_id: str) -> None:
    try:
        detect = importlib.import_module("bot.configs.detect")
    except ModuleNotFoundError:
        pytest.skip("bot.configs.detect (config reader, another helper's area) is not in this checkout yet")
    record = load_run_file(RUNS / run_id / "run.yaml")
    config = detect.load_config(RUNS / run_id / record.config)
    mesh = config.mesh(record.num_chips, record.num_slices)
    mesh.validate_against(record.num_chips)
    assert mesh.num_slices == record.num_slices
    sc = next(s for s in GEN.SCENARIOS if s.id == run_id)
    assert mesh.size("tensor") == sc.par.tensor and mesh.size("fsdp") == sc.par.fsdp * sc.par.dcn_fsdp


def test_configs_cover_all_three_formats() -> None:
    detect = pytest.importorskip("bot.configs.detect", reason="config reader not in this checkout yet")
    formats = {detect.load_config(RUNS / sc.id / sc.config_file).format for sc in GEN.SCENARIOS}
    assert formats == {"maxtext", "megatron", "ici_mesh"}


# --------------------------------------------------------------------------------------------- profiles
@pytest.mark.parametrize("run_id", IDS)
def test_profile_loads_with_the_product_loader(run_id: str) -> None:
    try:
        loader = importlib.import_module("bot.profiles.loader")
    except ModuleNotFoundError:
        pytest.skip("bot.profiles.loader (profile reader, another helper's area) is not in this checkout yet")
    run = LocalRunStore(RUNS).get(run_id)
    profile = loader.load_profile(run)
    assert profile.ops and profile.step_time_us and profile.num_steps


@pytest.mark.parametrize("run_id", IDS)
def test_exports_use_real_xprof_column_ids(run_id: str) -> None:
    hlo = _load(run_id, "hlo_stats.json")
    assert [c["id"] for c in hlo["cols"]] == [c[0] for c in GEN.HLO_STATS_COLS]
    roof = _load(run_id, "roofline_model.json")
    assert len(roof) == 2 and [c["id"] for c in roof[1]["cols"]] == ["severity", "message"]
    rows = _records(roof[0])
    assert {r["step"] for r in rows} >= {"Total", "Average"}
    for r in rows:
        assert 0.0 <= r["roofline_efficiency"] <= 1.0, "a fraction despite the '(%)' label"
        assert r["bound_by"] in {"Compute", "HBM", "Unknown"}
    overview = _load(run_id, "overview_page.json")
    assert len(overview) == 7 and overview[5] == {}
    steps = _table(overview, "stepnum")
    assert float(steps["p"]["steptime_ms_average"]) > 0


@pytest.mark.parametrize("run_id", IDS)
def test_tables_agree_with_each_other(run_id: str) -> None:
    hlo = _hlo(run_id)
    roof = [r for r in _records(_load(run_id, "roofline_model.json")[0]) if r["step"] == "Total"]
    program = next(r for r in roof if r["category"] == "Program")
    ops_total = sum(r["total_self_time"] for r in hlo)
    assert program["total_time"] == pytest.approx(ops_total, rel=1e-3)
    assert {r["operation"] for r in roof if r["rank"] > 0} == {r["hlo_op_name"] for r in hlo}
    steps = _table(_load(run_id, "overview_page.json"), "stepnum")
    window_us = float(steps["p"]["steptime_ms_average"]) * 1000 * len(steps["rows"])
    assert ops_total <= window_us * 1.001, "ops cannot take longer than the profiled steps"


# --------------------------------------------------------------------------------------------- physics
def test_compute_bound_runs_are_dominated_by_efficient_matmuls() -> None:
    for run_id in ("123", "618"):
        hlo = _hlo(run_id)
        assert hlo[0]["category"] == "convolution fusion" and hlo[0]["bound_by"] == "Compute"
        chip = get_chip(load_run_file(RUNS / run_id / "run.yaml").chip)
        matmul = _share(hlo, lambda r: r["category"] == "convolution fusion")
        assert matmul > 0.6
        assert hlo[0]["normalized_flop_rate"] * 1e9 > 0.7 * chip.peak_bf16_flops
        assert _share(hlo, lambda r: r["category"] in COLLECTIVES) < 0.05
    mfu_123 = load_run_file(RUNS / "123" / "run.yaml").measured.mfu_percent
    mfu_618 = load_run_file(RUNS / "618" / "run.yaml").measured.mfu_percent
    assert 55 <= mfu_123 <= 65 and mfu_618 > mfu_123


def test_hbm_bound_run_has_matmuls_below_the_ridge_point() -> None:
    record = load_run_file(RUNS / "204" / "run.yaml")
    chip = get_chip(record.chip)
    hlo = _hlo("204")
    gemms = [r for r in hlo if "__cublas$gemm" in r["hlo_op_expression"]]
    assert gemms and all(r["operational_intensity"] < chip.ridge_point for r in gemms)
    assert _share(hlo, lambda r: r["bound_by"] == "HBM") > 0.85
    assert _share(hlo, lambda r: r["category"] in {"loop fusion", "input fusion"}) > 0.2


@pytest.mark.parametrize("run_id", ["311", "520"])
def test_communication_bound_runs_spend_a_third_of_a_busy_step_in_collectives(run_id: str) -> None:
    hlo = _hlo(run_id)
    assert _share(hlo, lambda r: r["category"] in COLLECTIVES) >= 0.30
    analysis = _table(_load(run_id, "overview_page.json"), "selfTimePercent")
    duty = float(analysis["p"]["device_duty_cycle_percent"].rstrip("%"))
    assert duty >= 98.0, "the device looks busy: the point of this case"


def test_dcn_run_reduces_across_slices() -> None:
    record = load_run_file(RUNS / "520" / "run.yaml")
    per_slice = record.num_chips // record.num_slices
    top = _hlo("520")[0]
    assert top["category"] == "all-reduce"
    # iota replica groups: 16 groups of 8 chips, one chip per slice
    assert f"replica_groups=[{per_slice},{record.num_slices}]" in top["hlo_op_expression"]


def test_input_bound_run_waits_on_the_host_for_a_third_to_a_half_of_the_step() -> None:
    steps = _table(_load("415", "overview_page.json"), "stepnum")
    infeed = float(steps["p"]["infeed_time_ms_avg"])
    step = float(steps["p"]["steptime_ms_average"])
    assert 0.30 <= infeed / step <= 0.50
    rec = _table(_load("415", "overview_page.json"), "tip_type")
    assert rec["p"]["bottleneck"] == "host"
    assert get_chip(load_run_file(RUNS / "415" / "run.yaml").chip).family == "gpu"


def test_collective_times_follow_the_ring_formula() -> None:
    v5e = get_chip("tpu-v5e")
    link = GEN.ici_link(v5e, 1, True)
    assert link.bandwidth == 2 * v5e.intra.link_bandwidth
    t = GEN.collective_time_s("all-gather", 1e9, 16, link)
    assert t == pytest.approx(1e9 * 15 / 16 / (link.bandwidth * GEN.NETWORK_EFFICIENCY) + 8e-6)
    assert GEN.collective_time_s("all-reduce", 1e9, 16, link) == pytest.approx(2 * t - 8e-6)
    assert GEN.collective_time_s("all-reduce", 1e9, 1, link) == 0.0


def test_readme_lists_every_run_with_its_bottleneck() -> None:
    text = (RUNS / "README.md").read_text(encoding="utf-8")
    for sc in GEN.SCENARIOS:
        verdict, _ = GEN.EXPERT_VERDICT[sc.id]
        assert f"| `{sc.id}` |" in text and f"**{verdict}**" in text


# --------------------------------------------------------------------------------------------- determinism
def test_generator_is_deterministic_and_matches_the_committed_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    GEN.generate(a)
    GEN.generate(b)
    files = GEN.generated_files(a)
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), f"{rel} differs between two runs"
    stale = [str(rel) for rel in files if (RUNS / rel).read_bytes() != (a / rel).read_bytes()]
    assert not stale, f"committed sample runs are stale, regenerate with scripts/make_sample_runs.py: {stale}"


def test_check_mode_reports_stale_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    GEN.generate(tmp_path)
    assert GEN.main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "123" / "run.yaml").write_text("id: '123'\n", encoding="utf-8")
    assert GEN.main(["--out", str(tmp_path), "--check"]) == 1
    assert "123/run.yaml" in capsys.readouterr().err
