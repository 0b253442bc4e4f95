"""AOT check with real compiles on XLA:CPU virtual devices (the jax extra; CI installs it)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.proposals  # noqa: F401  (registers propose/review)
from bot.cli import cli
from bot.configs.mesh import Mesh
from bot.proposals.aot import aot_check
from bot.proposals.critic import critique
from bot.runs.store import LocalRunStore

pytestmark = [
    pytest.mark.slow,
    pytest.mark.jax,
    pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed (pip install 'asap[jax]')"),
]

RUNS = Path(__file__).resolve().parents[1] / "examples" / "runs"


@pytest.fixture(scope="module")
def run8():  # noqa: ANN201
    return LocalRunStore(RUNS).get("jax-cpu-8dev")


def test_8_device_mesh_compiles_with_fsdp_and_tensor_collectives(run8) -> None:  # noqa: ANN001
    r = aot_check(run8, Mesh(ici={"data": 2, "fsdp": 2, "tensor": 2}))
    assert r.status == "compiled", r.message
    assert r.devices == 8 and not r.scaled
    c = r.collective_counts
    assert c["all-gather"] + c["reduce-scatter"] > 0  # fsdp: weights gathered, gradients scattered
    assert c["all-reduce"] > 1  # tensor: row-parallel partial sums, plus the gradient reduction
    assert r.collective_bytes_per_step and r.collective_bytes_per_step > 0
    assert r.memory and r.memory.temp_bytes and r.memory.argument_bytes
    assert r.compile_s is not None and r.compile_s < 60


def test_data_only_has_just_the_gradient_all_reduce_and_tensor_adds_per_layer_ones(run8) -> None:  # noqa: ANN001
    data = aot_check(run8, Mesh(ici={"data": 8}))
    tensor = aot_check(run8, Mesh(ici={"tensor": 8}))
    assert data.compiled and tensor.compiled
    assert data.collective_counts["all-reduce"] >= 1
    assert data.collective_counts["all-gather"] == 0 and data.collective_counts["reduce-scatter"] == 0
    # Each block ends in all-reduces over tensor (attention out and MLP down, forward and backward).
    assert tensor.collective_counts["all-reduce"] >= 2 * run8.record.model.layers
    assert tensor.collective_counts["all-reduce"] > data.collective_counts["all-reduce"]


def test_256_chip_mesh_is_scaled_down_keeping_its_axes(example_runs: Path) -> None:
    run = LocalRunStore(example_runs).get("311")
    r = aot_check(run, Mesh(ici={"fsdp": 16, "tensor": 16}))
    assert r.status == "compiled", r.message
    assert r.real_devices == 256 and r.scaled and r.devices == 64
    assert r.compiled_axes == {"fsdp": 8, "tensor": 8}
    assert r.scale_note and "256" in r.scale_note and "ratios between the axes kept" in r.scale_note
    crit = critique(run, Mesh(ici={"fsdp": 16, "tensor": 16}), aot=True).check("aot_compile")
    assert crit is not None and crit.passed and not crit.skipped and "scaled from 256" in crit.reason


def test_sharding_jax_rejects_is_a_compile_error() -> None:
    # heads=3 over tensor=2: the weights cannot be split, JAX/XLA refuses to lower the step.
    job = {"axes": {"tensor": 2}, "dims": {"layers": 1, "d_model": 48, "heads": 3, "d_ff": 64, "vocab": 64,
                                           "seq": 8, "batch": 2}}
    proc = subprocess.run([sys.executable, "-m", "bot.proposals.aot_worker"], input=json.dumps(job),
                          capture_output=True, text=True, timeout=120)
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert answer["status"] == "compile_error" and "divisible" in answer["message"]


def test_review_aot_json_reports_the_new_mesh(tmp_path: Path) -> None:
    new = tmp_path / "new.yml"
    new.write_text("ici_mesh: {data: 2, fsdp: 4}\n")
    out = CliRunner().invoke(
        cli,
        ["--runs-dir", str(RUNS), "review", str(RUNS / "jax-cpu-8dev" / "mesh.yml"), str(new), "--run", "jax-cpu-8dev",
         "--aot", "--json"],
        catch_exceptions=False,
    )
    data = json.loads(out.output)
    a = data["new"]["aot"]
    assert a["status"] == "compiled" and a["mesh"] == {"ici": {"data": 2, "fsdp": 4}, "dcn": {}}
    assert a["collective_counts"]["all-gather"] > 0
    assert any(c["name"] == "aot_compile" and c["passed"] for c in data["critic"])
