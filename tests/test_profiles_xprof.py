"""XProf tool exports: real CPU exports from xprof 2.24, TPU-like tables on the real column sets, proto JSON."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from bot.errors import ProfileError
from bot.profiles import datatable
from bot.profiles.datatable import fast_table
from bot.profiles.model import BoundBy, OpKind
from bot.profiles.xprof_export import (
    HLO_KNOWN,
    HLO_OPTIONAL,
    HLO_REQUIRED,
    parse_hlo_stats,
    parse_op_profile,
    parse_overview_page,
    parse_roofline_model,
    read_xprof_export,
    tool_of,
)

DATA = Path(__file__).parent / "data" / "profiles"
GIB = float(1 << 30)


def real(tool: str) -> bytes:
    return (DATA / f"cpu_{tool}.json").read_bytes()


def hlo_table(rows: list[dict], drop: tuple[str, ...] = ()) -> dict:
    """A hlo_stats DataTable with xprof 2.24's real columns (taken from the CPU export) and given rows."""
    cols = [c for c in json.loads(real("hlo_stats"))["cols"] if c["id"] not in drop]
    defaults = {c["id"]: (0.0 if c["type"] == "number" else "") for c in cols}
    out = []
    for r in rows:
        values = {**defaults, **r}
        out.append({"c": [{"v": values[c["id"]]} for c in cols]})
    return {"cols": cols, "rows": out}


TPU_ROWS = [
    {
        "rank": 1,
        "program_id": "17",
        "category": "convolution fusion",
        "hlo_op_name": "fusion.12",
        "hlo_op_expression": "%fusion.12 = bf16[8,4096]{1,0} fusion(...), kind=kOutput",
        "occurrences": 10,
        "total_time": 5000.0,
        "total_self_time": 5000.0,
        "normalized_flop_rate": 400000.0,
        "measured_memory_bw": 300.0,
        "hbm_bw": 200.0,
        "operational_intensity": 1800.0,
        "bound_by": "Compute",
    },
    {
        "rank": 2,
        "program_id": "17",
        "category": "all-reduce",
        "hlo_op_name": "all-reduce.3",
        "occurrences": 10,
        "total_time": 2000.0,
        "total_self_time": 2000.0,
        "hbm_bw": 50.0,
        "bound_by": "HBM",
    },
    {
        "rank": 3,
        "program_id": "17",
        "category": "data formatting",
        "hlo_op_name": "copy.7",
        "occurrences": 20,
        "total_time": 700.0,
        "total_self_time": 700.0,
        "measured_memory_bw": 1000.0,
        "bound_by": "VMEM Read",
    },
    {
        "rank": 4,
        "program_id": "17",
        "category": "while",
        "hlo_op_name": "while.1",
        "occurrences": 1,
        "total_time": 9000.0,
        "total_self_time": 40.0,
        "normalized_flop_rate": 100.0,
    },
    {
        "rank": 5,
        "program_id": "17",
        "category": "loop fusion",
        "hlo_op_name": "add.1",
        "occurrences": 10,
        "total_time": 30.0,
        "parent_op_name": "fusion.12",
    },
    {
        "rank": 6,
        "program_id": "17",
        "category": "infeed",
        "hlo_op_name": "infeed.2",
        "occurrences": 10,
        "total_time": 100.0,
        "bound_by": "Unknown",
    },
]


# ------------------------------------------------------------------------------------- real CPU exports
def test_real_cpu_overview_gives_steps_from_the_step_table():
    p = parse_overview_page(real("overview_page"), source="ov.json")
    assert p.num_steps == 3
    rows = json.loads(real("overview_page"))[1]["rows"]
    expected = [r["c"][-1]["v"] * 1000 for r in rows]  # stepTimeMs column, ms -> us
    assert p.step_times_us == pytest.approx(expected)
    assert p.step_time_us == pytest.approx(sum(expected) / 3)
    assert p.device_kind == "CPU"
    # CPU_ONLY: xprof's duty cycle "0.0%" means "no device", not an idle device.
    assert p.device_duty_cycle_percent is None and p.host_wait_percent is None
    assert any("CPU_ONLY" in w for w in p.warnings)


@pytest.mark.parametrize(
    "tool,parse",
    [("hlo_stats", parse_hlo_stats), ("roofline_model", parse_roofline_model), ("op_profile", parse_op_profile)],
)
def test_real_cpu_op_tables_are_empty_but_not_errors(tool, parse):
    p = parse(real(tool), source=f"{tool}.json")
    assert p.ops == []
    assert any("no op rows" in w for w in p.warnings)


def test_read_by_file_name(tmp_path):
    f = tmp_path / "run-7.overview_page.json"
    f.write_bytes(real("overview_page"))
    assert tool_of(f) == "overview_page"
    assert read_xprof_export(f).num_steps == 3
    with pytest.raises(ProfileError, match="cannot tell which XProf tool"):
        read_xprof_export(tmp_path / "stats.json")


# ------------------------------------------------------------------------------------- hlo_stats
def test_hlo_stats_rows_become_ops_with_units_converted():
    p = parse_hlo_stats(orjson.dumps(hlo_table(TPU_ROWS)), source="h.json")
    ops = {o.name: o for o in p.ops}
    assert "add.1" not in ops  # nested in fusion.12 (parent_op_name): not counted twice
    assert any("nested" in w for w in p.warnings)
    f = ops["fusion.12"]
    assert f.kind is OpKind.COMPUTE and f.bound_by is BoundBy.COMPUTE
    assert f.occurrences == 10 and f.total_time_us == 5000.0 and f.program == "17"
    assert f.flops == pytest.approx(400000.0 * 1e9 * 5000e-6)  # GFLOP/s over total time
    assert f.bytes_accessed == pytest.approx(200.0 * GIB * 5000e-6)  # HBM GiB/s preferred
    assert ops["all-reduce.3"].kind is OpKind.COLLECTIVE and ops["all-reduce.3"].bound_by is BoundBy.HBM
    copy = ops["copy.7"]
    assert copy.kind is OpKind.MEMORY and copy.bound_by is BoundBy.HBM  # on-chip memory bound -> memory class
    assert copy.bytes_accessed == pytest.approx(1000.0 * GIB * 700e-6)  # falls back to measured_memory_bw
    loop = ops["while.1"]
    assert loop.total_time_us == 40.0 and loop.flops is None  # container: self time, no double-counted FLOPs
    assert ops["infeed.2"].kind is OpKind.HOST and ops["infeed.2"].bound_by is BoundBy.UNKNOWN


def test_hlo_stats_bytes_from_operational_intensity_when_no_bandwidth():
    row = {
        "hlo_op_name": "dot.1",
        "category": "convolution",
        "occurrences": 1,
        "total_time": 10.0,
        "normalized_flop_rate": 1000.0,
        "operational_intensity": 4.0,
    }
    op = parse_hlo_stats(orjson.dumps(hlo_table([row])), source="h.json").ops[0]
    assert op.flops == pytest.approx(1e7) and op.bytes_accessed == pytest.approx(1e7 / 4)


def test_fast_and_general_paths_agree():
    table = hlo_table(TPU_ROWS)
    compact = orjson.dumps(table)
    indented = json.dumps(table, indent=2).encode()  # not the compact form: general path
    args = dict(source="h.json", required=HLO_REQUIRED, optional=HLO_OPTIONAL, known=HLO_KNOWN, warnings=[])
    assert fast_table(compact, **args) is not None  # xprof's compact form takes the fast path
    assert fast_table(indented, **args) is None
    a = parse_hlo_stats(compact, source="h.json")
    b = parse_hlo_stats(indented, source="h.json")
    assert [o.name for o in a.ops] == [o.name for o in b.ops]
    assert a.ops == b.ops and a.warnings == b.warnings


def test_fast_path_across_many_windows(monkeypatch):
    rows = [dict(TPU_ROWS[i % 3], hlo_op_name=f"op.{i}", total_time=float(i)) for i in range(300)]
    table = hlo_table(rows)
    monkeypatch.setattr(datatable, "WINDOW_BYTES", 500)  # ~1 row per window
    args = dict(source="h.json", required=HLO_REQUIRED, optional=HLO_OPTIONAL, known=HLO_KNOWN, warnings=[])
    fast = fast_table(orjson.dumps(table), **args)
    assert fast is not None and fast.nrows == 300
    a = parse_hlo_stats(orjson.dumps(table), source="h.json")
    b = parse_hlo_stats(json.dumps(table, indent=1).encode(), source="h.json")
    assert a.ops == b.ops and [o.total_time_us for o in a.ops][:3] == [0.0, 1.0, 2.0]


def test_rows_the_fast_pattern_cannot_match_still_read():
    table = hlo_table(TPU_ROWS[:2])
    table["rows"][1]["c"][7] = {"v": 2000.0, "f": "2,000.0"}  # a formatted cell
    table["rows"][0]["c"][5] = None  # a null cell
    p = parse_hlo_stats(orjson.dumps(table), source="h.json")
    assert [o.total_time_us for o in p.ops] == [5000.0, 2000.0]


def test_escaped_strings_and_unicode_in_fast_path():
    row = {
        "hlo_op_name": 'fusion."q"\\x',
        "category": "loop fusion",
        "occurrences": 1,
        "total_time": 1.0,
        "hlo_op_expression": '{"c":[{"v":1}]} ünïcode',
    }
    p = parse_hlo_stats(orjson.dumps(hlo_table([row])), source="h.json")
    assert p.ops[0].name == 'fusion."q"\\x'


def test_unknown_column_warns_and_missing_required_column_names_it():
    table = hlo_table(TPU_ROWS[:1])
    table["cols"].append({"id": "brand_new_metric", "label": "x", "type": "number"})
    for r in table["rows"]:
        r["c"].append({"v": 1.0})
    p = parse_hlo_stats(orjson.dumps(table), source="h.json")
    assert len(p.ops) == 1 and any("brand_new_metric" in w for w in p.warnings)
    with pytest.raises(ProfileError) as e:
        parse_hlo_stats(orjson.dumps(hlo_table(TPU_ROWS[:1], drop=("total_time",))), source="h.json")
    assert "'total_time'" in str(e.value) and e.value.field == "cols"


@pytest.mark.parametrize(
    "mutate,field,message",
    [
        (lambda t: t["rows"][0]["c"].__setitem__(7, {"v": "fast"}), "rows[0].total_time", "expected a number"),
        (lambda t: t["rows"][0]["c"].__setitem__(7, {"v": -5.0}), "rows[0].total_time", "negative"),
        (lambda t: t["rows"][0]["c"].__setitem__(3, {"v": 12}), "rows[0].hlo_op_name", "op name"),
        (lambda t: t["rows"][0].__setitem__("x", 1), "rows[0].x", "unexpected key"),
        (lambda t: t["rows"][0]["c"].__setitem__(2, {"v": "a", "zz": 1}), "rows[0].c[2]", "cell"),
        (lambda t: t.__setitem__("extra", 1), "extra", "unexpected key"),
        (lambda t: t["cols"][0].pop("id"), "cols.0.id", "Field required"),
        (lambda t: t.__setitem__("rows", {"c": []}), "rows", "list"),
    ],
)
def test_hlo_stats_structure_errors_name_the_field(mutate, field, message):
    table = hlo_table(TPU_ROWS[:1])
    mutate(table)
    with pytest.raises(ProfileError) as e:
        parse_hlo_stats(orjson.dumps(table), source="h.json")
    assert e.value.field == field and message in str(e.value) and e.value.source == "h.json"


def test_malformed_json_reports_line_and_column():
    with pytest.raises(ProfileError) as e:
        parse_hlo_stats(b'{"cols": [\n  {"id": "rank",, }]}', source="bad.json")
    assert "line 2, column" in str(e.value) and e.value.source == "bad.json"


def test_hlo_stats_proto_json_camel_and_snake_case():
    rec = {
        "hloCategory": "convolution fusion",
        "hloExpression": "%fusion.1 = bf16[2]{0} fusion(%p)",
        "occurrences": 4,
        "totalTimeInUs": 100.0,
        "totalSelfTimeInUs": 100.0,
        "flopsV2": 5e9,
        "bytesAccessed": "2000000",
        "boundBy": "Compute",
        "programId": "9",
    }
    camel = parse_hlo_stats(orjson.dumps({"hloStatsRecord": [rec]}), source="h.json").ops[0]
    assert camel.name == "fusion.1" and camel.flops == 5e9 and camel.bytes_accessed == 2e6
    assert camel.bound_by is BoundBy.COMPUTE and camel.program == "9"
    snake = parse_hlo_stats(
        orjson.dumps(
            {
                "hlo_stats_record": [
                    {
                        "hlo_category": "all-gather",
                        "hlo_expression": "%all-gather.2 = f32[8]{0} all-gather(%x)",
                        "occurrences": 1,
                        "total_time_in_us": 7.0,
                    }
                ]
            }
        ),
        source="h.json",
    ).ops[0]
    assert snake.name == "all-gather.2" and snake.kind is OpKind.COLLECTIVE
    with pytest.raises(ProfileError) as e:
        parse_hlo_stats(orjson.dumps({"hloStatsRecord": [{**rec, "mystery": 1}]}), source="h.json")
    assert e.value.field == "hloStatsRecord.0.mystery"


# ------------------------------------------------------------------------------------- roofline_model
def roof_table(rows: list[dict]) -> list[dict]:
    base = json.loads(real("roofline_model"))
    cols = base[0]["cols"]
    defaults = {c["id"]: (False if c["type"] == "boolean" else 0.0 if c["type"] == "number" else "") for c in cols}
    base[0]["rows"] = [{"c": [{"v": {**defaults, **r}[c["id"]]} for c in cols]} for r in rows]
    base[0]["p"]["device_type"] = "TPU v5p"
    base[1]["rows"] = [{"c": [{"v": "WARNING"}, {"v": "Incomplete step"}]}]
    return base


def test_roofline_uses_total_rows_and_keeps_efficiency_and_bound_by():
    rows = [
        {
            "step": "Total",
            "rank": 0,
            "category": "Program",
            "operation": "Program",
            "occurrences": 1,
            "total_time": 9e3,
        },
        {
            "step": "Total",
            "rank": 1,
            "category": "convolution fusion",
            "operation": "fusion.1",
            "occurrences": 8,
            "total_time": 800.0,
            "measured_flop_rate": 2e5,
            "hbm_bw": 100.0,
            "bound_by": "Compute",
            "roofline_efficiency": 0.62,
            "hlo_module_id": "5",
        },
        {
            "step": "1",
            "rank": 1,
            "category": "convolution fusion",
            "operation": "fusion.1",
            "occurrences": 4,
            "total_time": 400.0,
        },
    ]
    p = parse_roofline_model(orjson.dumps(roof_table(rows)), source="r.json")
    assert [o.name for o in p.ops] == ["fusion.1"]
    op = p.ops[0]
    assert op.total_time_us == 800.0 and op.roofline_efficiency == 0.62 and op.bound_by is BoundBy.COMPUTE
    assert op.flops == pytest.approx(2e5 * 1e3 * 800.0) and op.program == "5"
    assert p.device_kind == "TPU v5p"
    assert any("Incomplete step" in w for w in p.warnings)


def test_roofline_sums_per_step_rows_and_counts_steps():
    rows = [
        {"step": "1", "rank": 1, "category": "loop fusion", "operation": "f", "occurrences": 2, "total_time": 10.0},
        {"step": "2", "rank": 1, "category": "loop fusion", "operation": "f", "occurrences": 2, "total_time": 14.0},
    ]
    p = parse_roofline_model(orjson.dumps(roof_table(rows)), source="r.json")
    assert p.num_steps == 2 and p.ops[0].total_time_us == 24.0 and p.ops[0].occurrences == 4


def test_roofline_proto_json_record_types():
    db = {
        "deviceType": "TPU v4",
        "peakFlopRate": 275000.0,
        "rooflineModelRecord": [
            {
                "recordType": "ALL",
                "hloName": "fusion.3",
                "hloCategory": "output fusion",
                "occurrences": 3,
                "totalTimeInUs": 30.0,
                "rooflineEfficiency": 0.5,
                "boundBy": "HBM",
            },
            {
                "recordType": "PER_STEP",
                "stepNum": 1,
                "hloName": "fusion.3",
                "hloCategory": "output fusion",
                "totalTimeInUs": 10.0,
            },
        ],
    }
    p = parse_roofline_model(orjson.dumps(db), source="r.json")
    assert len(p.ops) == 1 and p.ops[0].total_time_us == 30.0 and p.ops[0].bound_by is BoundBy.HBM
    assert p.device_kind == "TPU v4"


# ------------------------------------------------------------------------------------- overview / op_profile
def test_overview_tpu_step_table_and_properties():
    tables = json.loads(real("overview_page"))
    tables[0]["p"]["device_duty_cycle_percent"] = "87.5%"
    tables[1] = {
        "cols": [
            {"id": i, "label": i, "type": "number"}
            for i in (
                "stepnum",
                "tcComputeTimeMs",
                "tcInfeedTimeMs",
                "tcOutfeedTimeMs",
                "tcIdleTimeMs",
                "hostTransferTimeMs",
            )
        ],
        "rows": [
            {"c": [{"v": "1"}, {"v": 80.0}, {"v": 15.0}, {"v": 0.0}, {"v": 5.0}, {"v": 0.0}]},
            {"c": [{"v": "2"}, {"v": 90.0}, {"v": 5.0}, {"v": 0.0}, {"v": 5.0}, {"v": 0.0}]},
        ],
        "p": {"hardware_type": "TPU", "steptime_ms_average": "100.0"},
    }
    tables[2]["p"].update({"device_type": "TPU v5p", "device_core_count": "64"})
    p = parse_overview_page(orjson.dumps(tables), source="o.json")
    assert p.step_times_us == [100000.0, 100000.0] and p.step_time_us == 100000.0
    assert p.host_wait_percent == pytest.approx(10.0) and p.compute_time_percent == pytest.approx(85.0)
    assert p.device_duty_cycle_percent == 87.5 and p.device_kind == "TPU v5p" and p.num_devices == 64


def test_overview_step_table_without_step_time_is_an_error():
    tables = json.loads(real("overview_page"))
    tables[1]["cols"] = tables[1]["cols"][:3]
    tables[1]["rows"] = [{"c": r["c"][:3]} for r in tables[1]["rows"]]
    with pytest.raises(ProfileError, match="stepTimeMs"):
        parse_overview_page(orjson.dumps(tables), source="o.json")


def test_overview_proto_json():
    page = {
        "runEnvironment": {"deviceType": "TPU v6e", "deviceCoreCount": 8, "hostCount": 1},
        "inputAnalysis": {"hardwareType": "TPU", "stepTimeSummary": {"average": 12.5}, "inputPercent": 30.0},
        "analysis": {"deviceDutyCyclePercent": 70.0, "mxuUtilizationPercent": 40.0},
    }
    p = parse_overview_page(orjson.dumps(page), source="o.json")
    assert p.step_time_us == 12500.0 and p.host_wait_percent == 30.0 and p.device_duty_cycle_percent == 70.0
    assert p.device_kind == "TPU v6e" and p.num_devices == 8
    with pytest.raises(ProfileError) as e:
        parse_overview_page(orjson.dumps({**page, "surprise": {}}), source="o.json")
    assert e.value.field == "surprise"


def test_op_profile_tree_walks_to_xla_instructions():
    def xla(name, cat, ps, flops, hbm):
        return {
            "name": name,
            "xla": {"op": "fusion", "category": cat, "programId": "3"},
            "metrics": {"rawTime": ps, "rawFlops": flops, "rawBytesAccessedArray": [hbm, 0, 0], "occurrences": 2},
            "children": [{"name": "inner.1", "xla": {"op": "add"}, "metrics": {"rawTime": ps}}],
        }

    prof = {
        "deviceType": "TPU v5p",
        "byCategory": {
            "name": "root",
            "metrics": {"rawTime": 1e9},
            "children": [
                {"name": "convolution fusion", "category": {}, "children": [xla("fusion.1", "", 4e6, 1e9, 5e6)]},
                {"name": "all-reduce", "category": {}, "children": [xla("all-reduce.2", "", 2e6, 0, 1e6)]},
            ],
        },
    }
    p = parse_op_profile(orjson.dumps(prof), source="op.json")
    ops = {o.name: o for o in p.ops}
    assert set(ops) == {"fusion.1", "all-reduce.2"}  # fusion children are not separate ops
    assert (
        ops["fusion.1"].total_time_us == 4.0 and ops["fusion.1"].flops == 1e9 and ops["fusion.1"].bytes_accessed == 5e6
    )
    assert ops["fusion.1"].category == "convolution fusion" and ops["all-reduce.2"].kind is OpKind.COLLECTIVE
    with pytest.raises(ProfileError) as e:
        parse_op_profile(orjson.dumps({"byCategory": {"name": "x", "metrics": {"rawTime": "slow"}}}), source="op.json")
    assert e.value.field == "byCategory.metrics.rawTime"


def test_wrong_top_level_types_are_clear():
    for parse in (parse_hlo_stats, parse_roofline_model, parse_overview_page, parse_op_profile):
        with pytest.raises(ProfileError, match="expected"):
            parse(b"42", source="x.json")
