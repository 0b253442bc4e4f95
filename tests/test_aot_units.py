"""AOT check without compiling: scaling, reduced dims, refusals, jax missing, timeout, critic wiring, CLI JSON."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import bot.cli.proposals  # noqa: F401  (registers propose/review)
from bot.cli import cli
from bot.configs.mesh import Mesh
from bot.proposals import aot
from bot.proposals.aot import AotReport, aot_check, reduced_dims, scale_axes
from bot.proposals.critic import check_aot, critique
from bot.runs.record import RunRecord
from bot.runs.store import LocalRunStore

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "examples" / "runs"


def _record(chips: int, heads: int | None = 32) -> RunRecord:
    return RunRecord.model_validate(
        {"id": "t", "chip": "tpu-v5p", "num_chips": chips, "model": {"heads": heads} if heads else None}
    )


def _no_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the worker must not be started for this mesh")

    monkeypatch.setattr(aot.subprocess, "run", boom)


# ----------------------------------------------------------------------------- scaling and dims


def test_scale_256_chips_keeps_axes_and_ratios() -> None:
    axes, note = scale_axes({"data": 1, "fsdp": 64, "sequence": 1, "tensor": 4}, 64)
    assert axes == {"data": 1, "fsdp": 32, "sequence": 1, "tensor": 2}
    assert note and "256" in note and "fsdp=32 tensor=2" in note and "ratios between the axes kept" in note


def test_small_mesh_is_not_scaled() -> None:
    axes, note = scale_axes({"data": 2, "fsdp": 2, "sequence": 1, "tensor": 2}, 64)
    assert axes == {"data": 2, "fsdp": 2, "sequence": 1, "tensor": 2} and note is None


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(aot.SUPPORTED_AXES), st.integers(1, 512), min_size=1))
def test_scaling_keeps_structure_and_fits(sizes: dict[str, int]) -> None:
    axes, note = scale_axes(sizes, 64)
    full = {a: sizes.get(a, 1) for a in sizes}
    if math.prod(sizes.values()) <= 64:
        assert axes == full
    else:
        assert math.prod(axes.values()) <= 64
    for a, v in sizes.items():
        assert (axes[a] > 1) == (v > 1), (sizes, axes)
        assert axes[a] <= v
    assert (note is None) == (axes == sizes)


@given(
    st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([1, 2, 4, 8, 32]), st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2, 4]), st.sampled_from([None, 8, 12, 40, 64]),
)
def test_reduced_dims_divisible_by_every_axis(data: int, fsdp: int, tensor: int, seq: int, heads: int | None) -> None:
    d = reduced_dims({"data": data, "fsdp": fsdp, "tensor": tensor, "sequence": seq}, heads=heads)
    assert d.layers == 2
    assert d.heads % tensor == 0 and d.d_ff % tensor == 0 and d.vocab % tensor == 0
    assert d.d_model % fsdp == 0 and d.d_model % d.heads == 0
    assert d.batch % (data * fsdp) == 0 and d.seq % seq == 0
    assert d.d_model <= 1024  # reduced, not the real model


# ----------------------------------------------------------------------------- refused / skipped before compiling


def test_mesh_not_multiplying_to_devices_is_refused_before_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_subprocess(monkeypatch)
    r = aot_check(_record(8), Mesh(ici={"data": 2, "tensor": 2}))
    assert r.status == "refused" and not r.compiled
    assert "4 devices" in r.message and "8" in r.message
    c = check_aot(r)
    assert c.skipped and c.passed


def test_expert_and_pipeline_axes_are_skipped_not_faked(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_subprocess(monkeypatch)
    r = aot_check(_record(16), Mesh(ici={"fsdp": 4, "expert": 2, "pipeline": 2}))
    assert r.status == "skipped"
    assert "expert=2" in r.message and "pipeline=2" in r.message
    assert r.devices is None and r.collective_counts == {}


# ----------------------------------------------------------------------------- jax missing, timeout, worker errors


def test_jax_missing_reports_unavailable_and_critic_skips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "jax.py").write_text("raise ImportError('No module named jax (test shim)')\n")
    monkeypatch.setenv("PYTHONPATH", str(shim))
    aot._CACHE.clear()
    r = aot_check(_record(8), Mesh(ici={"data": 2, "fsdp": 2, "tensor": 2}), timeout_s=60)
    assert r.status == "unavailable"
    assert "pip install 'asap[jax]'" in r.message
    c = check_aot(r)
    assert c.name == "aot_compile" and c.passed and c.skipped and "unavailable" in c.reason


def test_timeout_is_skipped_with_reason() -> None:
    aot._CACHE.clear()
    r = aot_check(_record(8), Mesh(ici={"data": 8}), timeout_s=0.05)
    assert r.status == "timeout" and "0.05 s" in r.message
    c = check_aot(r)
    assert c.skipped and c.passed and "timeout" in c.reason


def test_worker_rejects_garbage_input_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bot.proposals.aot_worker"], input="not json", capture_output=True, text=True, timeout=60
    )
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert answer["status"] == "error" and "not JSON" in answer["message"]
    assert "Traceback" not in proc.stderr


def test_compile_error_is_a_hard_failure() -> None:
    r = AotReport(status="compile_error", message="ValueError: sharding rejected", mesh={"ici": {}, "dcn": {}},
                  mesh_short="data=2", real_devices=2)
    c = check_aot(r)
    assert not c.passed and c.hard and "XLA rejected" in c.reason and "sharding rejected" in c.reason


# ----------------------------------------------------------------------------- critic and CLI wiring


def test_critique_default_has_no_aot_check(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_subprocess(monkeypatch)
    run = LocalRunStore(RUNS).get("jax-cpu-8dev")
    res = critique(run, Mesh(ici={"data": 2, "fsdp": 2, "tensor": 2}))
    assert res.check("aot_compile") is None


def test_critique_aot_skipped_when_product_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_subprocess(monkeypatch)
    run = LocalRunStore(RUNS).get("jax-cpu-8dev")
    res = critique(run, Mesh(ici={"data": 2, "fsdp": 2}), aot=True)
    c = res.check("aot_compile")
    assert c is not None and c.skipped and "do not multiply" in c.reason


def _fake_report(run, mesh, *, settings=None, timeout_s=120.0):  # noqa: ANN001, ANN202
    return AotReport(
        status="compiled", message="fake", mesh={"ici": dict(mesh.ici), "dcn": dict(mesh.dcn)},
        mesh_short=mesh.short(), real_devices=mesh.num_devices, devices=mesh.num_devices,
        compiled_axes=dict(mesh.ici), collective_counts=dict.fromkeys(aot.SHOWN_OPS, 1) | {"all-gather": mesh.size("fsdp")},
        collective_bytes_per_step=1_000_000, memory=aot.AotMemory(temp_bytes=2_000_000), compile_s=1.0,
    )


def test_propose_aot_json_adds_aot_to_baseline_and_each_proposal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aot, "aot_check", _fake_report)
    out = CliRunner().invoke(cli, ["--runs-dir", str(RUNS), "propose", "jax-cpu-8dev", "--aot", "--json"],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["baseline"]["aot"]["status"] == "compiled"
    assert data["proposals"]
    for p in data["proposals"]:
        assert p["aot"]["mesh"] == p["mesh"]
        assert set(aot.SHOWN_OPS) <= set(p["aot"]["collective_counts"])
        assert p["aot"]["caveat"].startswith("figures are for the REDUCED model")
        assert p["critic"][-1]["name"] == "aot_compile" and p["critic"][-1]["passed"]
    plain = CliRunner().invoke(cli, ["--runs-dir", str(RUNS), "propose", "jax-cpu-8dev", "--json"], catch_exceptions=False)
    assert all("aot" not in p for p in json.loads(plain.output)["proposals"])


def test_propose_aot_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aot, "aot_check", _fake_report)
    out = CliRunner().invoke(cli, ["--runs-dir", str(RUNS), "propose", "jax-cpu-8dev", "--aot", "--no-diff"],
                             catch_exceptions=False)
    assert "AOT compile at reduced scale" in out.output and "baseline" in out.output
    assert "REDUCED model" in out.output
