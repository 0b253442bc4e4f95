"""A real, tiny JAX run through scripts/jax_sample_run.py: the folder it writes must load as a run and
carry compiled HLO with collectives and a step-annotated device trace."""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot.runs.store import LocalRunStore

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "jax_sample_run.py"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.jax,
    pytest.mark.skipif(
        importlib.util.find_spec("jax") is None, reason="jax is not installed (pip install -e '.[jax]')"
    ),
]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    out = runs / "tiny-4dev"
    proc = subprocess.run(
        [
            sys.executable, str(SCRIPT), "--out", str(out), "--devices", "4", "--mesh", "fsdp=2,tensor=2",
            "--layers", "1", "--d-model", "64", "--heads", "2", "--seq", "32", "--batch", "4",
            "--vocab", "256", "--steps", "3", "--max-xplane-mb", "64",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_folder_loads_as_a_run_with_model_and_measurement(tiny_run: Path) -> None:
    run = LocalRunStore(tiny_run.parent).get("tiny-4dev")
    rec = run.record
    assert (rec.framework, rec.chip, rec.num_chips, rec.config) == ("jax", "cpu", 4, "mesh.yml")
    assert (rec.model.layers, rec.model.d_model, rec.model.heads, rec.model.d_ff) == (1, 64, 2, 256)
    assert (rec.training.global_batch, rec.training.seq_len, rec.training.micro_batch) == (4, 32, 2)
    assert rec.measured.step_time_ms > 0
    assert rec.measured.tokens_per_second == pytest.approx(4 * 32 / (rec.measured.step_time_ms / 1e3), rel=1e-3)
    for rel in rec.profile:
        assert run.path(rel, field="profile").is_file(), rel
    assert yaml.safe_load((tiny_run / "mesh.yml").read_text()) == {"ici_mesh": {"data": 1, "fsdp": 2, "tensor": 2}}


def test_hlo_is_the_partitioned_step_with_collectives(tiny_run: Path) -> None:
    hlo = (tiny_run / "train_step.hlo.txt").read_text()
    assert hlo.startswith("HloModule jit_train_step")
    assert " all-gather(" in hlo or " all-gather-start(" in hlo  # FSDP weight gathers
    assert " all-reduce(" in hlo or " all-reduce-start(" in hlo  # tensor-parallel sums, gradient reductions


def test_trace_has_step_markers_and_device_ops(tiny_run: Path) -> None:
    rec = LocalRunStore(tiny_run.parent).get("tiny-4dev").record
    traces = [p for p in rec.profile if p.endswith(".trace.json.gz")]
    assert len(traces) == 1 and traces[0].startswith("plugins/profile/")
    with gzip.open(tiny_run / traces[0], "rt") as fh:
        events = json.load(fh)["traceEvents"]
    steps = {e["args"]["step_num"] for e in events if e.get("name") == "train" and e.get("ph") == "X"}
    assert steps == {"1", "2"}  # --steps 3: step 0 warms up (compiles), steps 1-2 are profiled
    device_ops = [e for e in events if (e.get("args") or {}).get("hlo_module") == "jit_train_step"]
    assert {e["args"]["device_ordinal"] for e in device_ops} == {"0", "1", "2", "3"}
    assert any(e["args"]["hlo_op"].startswith(("all-gather", "all-reduce")) for e in device_ops)


def test_xplane_and_xprof_tool_json_are_written(tiny_run: Path) -> None:
    assert list(tiny_run.glob("plugins/profile/*/*.xplane.pb"))  # kept: under --max-xplane-mb
    if importlib.util.find_spec("xprof") is None:
        pytest.skip("xprof is not installed")
    overview = json.loads((tiny_run / "overview_page.json").read_text())
    assert overview  # non-empty JSON from xprof's converter
    assert (tiny_run / "op_profile.json").is_file()
    assert "XProf tools: overview_page: written" in LocalRunStore(tiny_run.parent).get("tiny-4dev").record.description
