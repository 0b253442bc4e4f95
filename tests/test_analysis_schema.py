"""The `asap why --json` schema is stable and documented: keys present, every field in docs/json-output.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_analysis_support import collective, matmul, profiled, record, run_analysis

from bot.analysis.report import AnalysisReport, Diagnosis, Evidence, Kpis, PredictedStep, RunSummary, TopOp

DOC = Path(__file__).resolve().parents[1] / "docs" / "json-output.md"

# Keys other tools read. Removing or renaming any of them is a breaking change: bump schema_version.
STABLE_KEYS = {
    "": {"schema_version", "run", "kpis", "top_ops", "diagnosis", "unavailable", "warnings"},
    "run": {"id", "name", "chip", "chip_name", "num_chips", "num_slices", "mesh", "mesh_short", "config_format",
            "model", "params", "profile_sources"},
    "kpis": {"step_time_ms", "step_time_source", "device_duty_cycle_percent", "collective_percent",
             "host_wait_percent", "compute_bound_percent", "hbm_bound_percent", "idle_percent", "mfu_percent",
             "achieved_tflops_per_chip", "hbm_used_bytes", "hbm_capacity_bytes", "hbm_use_percent",
             "tokens_per_second"},
    "top_ops": {"name", "category", "kind", "time_percent", "time_per_step_ms", "occurrences", "flops",
                "bytes_accessed", "arithmetic_intensity", "bound_by", "bound_by_source", "roofline_efficiency"},
    "diagnosis": {"bottleneck", "secondary", "summary", "evidence", "conflicts", "confidence",
                  "confidence_reasons", "scores"},
    "evidence": {"signal", "value", "statement"},
}


@pytest.fixture(scope="module")
def report_json() -> dict:
    ops = [matmul("fusion.1", 0.5), collective("all-reduce.1", 0.35, group=8)]
    return json.loads(run_analysis(record(), profiled(ops, duty=99)).model_dump_json())


def test_stable_keys_are_present(report_json: dict) -> None:
    assert STABLE_KEYS[""] <= set(report_json)
    assert STABLE_KEYS["run"] <= set(report_json["run"])
    assert STABLE_KEYS["kpis"] <= set(report_json["kpis"])
    assert report_json["top_ops"] and all(STABLE_KEYS["top_ops"] <= set(op) for op in report_json["top_ops"])
    assert STABLE_KEYS["diagnosis"] <= set(report_json["diagnosis"])
    assert all(STABLE_KEYS["evidence"] <= set(e) for e in report_json["diagnosis"]["evidence"])
    assert report_json["schema_version"] == 1
    assert report_json["predicted"] is None  # a profile's report: the step was measured, not predicted
    assert report_json["diagnosis"]["bottleneck"] in {"compute", "hbm", "communication", "host"}
    assert set(report_json["diagnosis"]["scores"]) == {"compute", "hbm", "communication", "host"}


def test_every_field_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", text, flags=re.MULTILINE))
    for model in (AnalysisReport, RunSummary, Kpis, TopOp, Diagnosis, Evidence, PredictedStep):
        missing = set(model.model_fields) - documented
        assert not missing, f"{model.__name__} fields not documented in {DOC.name}: {sorted(missing)}"


def test_documented_example_is_a_valid_report() -> None:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"```json\n(.*?)\n```", text, flags=re.DOTALL)
    assert block, "docs/json-output.md has no JSON example"
    example = AnalysisReport.model_validate_json(block.group(1))
    assert example.diagnosis.bottleneck == "communication"
    assert {op.bound_by for op in example.top_ops} >= {"dcn"}


def test_report_round_trips_through_json(report_json: dict) -> None:
    again = AnalysisReport.model_validate(report_json)
    assert json.loads(again.model_dump_json()) == report_json
