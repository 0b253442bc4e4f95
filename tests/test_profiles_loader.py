"""load_profile: discovery, run.yaml profile lists, merging, guards (size, paths outside the run)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import orjson
import pytest

from bot.errors import AsapError, ProfileError
from bot.profiles import io as profile_io
from bot.profiles.loader import load_profile, load_profile_files
from bot.profiles.model import BoundBy, OpKind
from bot.runs.store import LocalRunStore

DATA = Path(__file__).parent / "data" / "profiles"


def make_run(
    root: Path, files: dict[str, str | Path | bytes], profile: list[str] | None = None, run_id: str = "77"
) -> Path:
    folder = root / run_id
    folder.mkdir(parents=True)
    lines = [f"id: '{run_id}'", "chip: tpu-v5p", "num_chips: 4"]
    if profile is not None:
        lines.append("profile: [" + ", ".join(json.dumps(p) for p in profile) + "]")
    (folder / "run.yaml").write_text("\n".join(lines) + "\n")
    for name, src in files.items():
        dest = folder / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, Path):
            shutil.copy(src, dest)
        elif isinstance(src, bytes):
            dest.write_bytes(src)
        else:
            dest.write_text(src)
    return folder


def load(root: Path, run_id: str = "77"):
    return load_profile(LocalRunStore(root).get(run_id))


def test_discovers_and_merges_a_real_cpu_run(tmp_path):
    make_run(
        tmp_path,
        {
            "overview_page.json": DATA / "cpu_overview_page.json",
            "hlo_stats.json": DATA / "cpu_hlo_stats.json",
            "op_profile.json": DATA / "cpu_op_profile.json",
            "roofline_model.json": DATA / "cpu_roofline_model.json",
            "step.trace.json.gz": DATA / "cpu_step.trace.json.gz",
            "step.hlo.txt": DATA / "step.hlo.txt",
            "notes.txt": "not a profile",
        },
    )
    p = load(tmp_path)
    assert sorted(p.sources) == sorted(
        [
            "hlo_stats.json",
            "op_profile.json",
            "overview_page.json",
            "roofline_model.json",
            "step.trace.json.gz",
            "step.hlo.txt",
        ]
    )
    assert p.num_steps == 3 and p.step_time_us == pytest.approx(sum(p.step_times_us) / 3)
    assert p.num_devices == 4 and p.device_kind == "cpu"
    # CPU: xprof's op tables are empty, so op times come from the trace; HLO fills collective payloads.
    ar = next(o for o in p.ops if o.name == "all-reduce.3")
    assert ar.kind is OpKind.COLLECTIVE and ar.collective_bytes == 4 + 128 * 128 * 4 and ar.group_size == 2
    assert {c.name for c in p.collectives} == {"all-reduce", "all-reduce.3"}
    assert any("no op rows" in w for w in p.warnings)


def hlo_rows_table() -> bytes:
    cols = json.loads((DATA / "cpu_hlo_stats.json").read_text())["cols"]
    row = {
        "hlo_op_name": "fusion.1",
        "category": "convolution fusion",
        "occurrences": 5,
        "total_time": 100.0,
        "normalized_flop_rate": 1000.0,
        "program_id": "1",
    }
    return orjson.dumps(
        {"cols": cols, "rows": [{"c": [{"v": row.get(c["id"], 0.0 if c["type"] == "number" else "")} for c in cols]}]}
    )


def test_hlo_stats_rows_win_and_roofline_fills_bound_by(tmp_path):
    roof = json.loads((DATA / "cpu_roofline_model.json").read_text())
    cols = roof[0]["cols"]
    vals = {
        "step": "Total",
        "rank": 1,
        "category": "convolution fusion",
        "operation": "fusion.1",
        "occurrences": 5,
        "total_time": 100.0,
        "bound_by": "Compute",
        "roofline_efficiency": 0.8,
    }
    roof[0]["rows"] = [
        {
            "c": [
                {"v": vals.get(c["id"], False if c["type"] == "boolean" else 0.0 if c["type"] == "number" else "")}
                for c in cols
            ]
        }
    ]
    make_run(
        tmp_path,
        {
            "hlo_stats.json": hlo_rows_table(),
            "roofline_model.json": json.dumps(roof),
            "overview_page.json": DATA / "cpu_overview_page.json",
        },
    )
    p = load(tmp_path)
    op = p.ops[0]
    assert op.flops == pytest.approx(1000.0 * 1e3 * 100.0)  # from hlo_stats
    assert op.bound_by is BoundBy.COMPUTE and op.roofline_efficiency == 0.8  # filled from roofline_model
    assert p.num_steps == 3


def test_profile_list_in_run_yaml_and_folders(tmp_path):
    make_run(
        tmp_path,
        {"exports/hlo_stats.json": hlo_rows_table(), "ignored/hlo_stats.json": "{broken"},
        profile=["exports", "missing.json"],
    )
    p = load(tmp_path)
    assert p.sources == ["exports/hlo_stats.json"] and len(p.ops) == 1
    assert any("missing.json" in w and "does not exist" in w for w in p.warnings)


def test_profile_path_outside_run_folder_is_refused(tmp_path):
    make_run(tmp_path, {}, profile=["../../etc/passwd"])
    with pytest.raises(AsapError, match="outside the run folder"):
        load(tmp_path)
    with pytest.raises(ProfileError, match="outside"):
        load_profile_files([Path("/etc/hostname")], tmp_path)


def test_symlink_leading_outside_is_skipped(tmp_path):
    secret = tmp_path / "secret" / "hlo_stats.json"
    secret.parent.mkdir()
    secret.write_bytes(hlo_rows_table())
    folder = make_run(tmp_path / "runs", {"overview_page.json": DATA / "cpu_overview_page.json"})
    (folder / "hlo_stats.json").symlink_to(secret)
    p = load(tmp_path / "runs")
    assert p.ops == [] and any("links outside" in w for w in p.warnings)


def test_bad_file_becomes_a_warning_when_others_are_usable(tmp_path):
    make_run(tmp_path, {"overview_page.json": DATA / "cpu_overview_page.json", "hlo_stats.json": '{"cols": 3}'})
    p = load(tmp_path)
    assert p.num_steps == 3
    assert any(w.startswith("hlo_stats.json: cols") for w in p.warnings)


def test_nothing_usable_names_folder_and_expected_files(tmp_path):
    folder = make_run(tmp_path, {"hlo_stats.json": "not json", "readme.md": "hi"})
    with pytest.raises(ProfileError) as e:
        load(tmp_path)
    assert e.value.source == str(folder)
    assert "overview_page.json" in str(e.value) and "xplane.pb" in str(e.value) and "malformed JSON" in str(e.value)
    with pytest.raises(ProfileError, match="no usable profile"):
        load_profile_files([], tmp_path)


def test_sparse_2gb_file_is_refused_by_size(tmp_path):
    folder = make_run(tmp_path, {"overview_page.json": DATA / "cpu_overview_page.json"})
    big = folder / "hlo_stats.json"
    with big.open("wb") as fh:
        fh.truncate(2 * 1024**3)  # sparse: no 2 GB are written
    p = load(tmp_path)
    warning = next(w for w in p.warnings if w.startswith("hlo_stats.json"))
    assert "2.0 GiB" in warning and "1.0 GiB" in warning
    with pytest.raises(ProfileError) as e:
        profile_io.read_bytes(big)
    assert e.value.source == str(big) and "limit" in str(e.value)


def test_xplane_session_is_converted_without_writing_into_the_run(tmp_path):
    folder = make_run(
        tmp_path,
        {"plugins/profile/s1/host.xplane.pb": DATA / "session/plugins/profile/2026_01_01_00_00_00/host.xplane.pb"},
    )
    p = load(tmp_path)
    assert p.sources == ["plugins/profile/s1/host.xplane.pb"] and p.num_steps == 3
    assert sorted(x.name for x in (folder / "plugins/profile/s1").iterdir()) == ["host.xplane.pb"]


def test_xplane_without_xprof_says_to_install_the_extra(tmp_path, monkeypatch):
    make_run(
        tmp_path,
        {
            "plugins/profile/s1/host.xplane.pb": DATA / "session/plugins/profile/2026_01_01_00_00_00/host.xplane.pb",
            "overview_page.json": DATA / "cpu_overview_page.json",
        },
    )
    monkeypatch.setitem(sys.modules, "xprof.convert.raw_to_tool_data", None)  # as if not installed
    p = load(tmp_path)
    assert any("xprof" in w and "pip install" in w for w in p.warnings)


def test_example_runs_load(example_runs):
    store = LocalRunStore(example_runs)
    for run_id in store.list_ids():
        p = load_profile(store.get(run_id))
        assert p.sources and (p.ops or p.step_time_us), run_id
