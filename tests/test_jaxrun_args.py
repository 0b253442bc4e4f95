"""Fast checks of the JAX sample-run generator that need no JAX: argument validation and the helpers
that summarize what it captured (mesh parsing, HLO collective counts, trace summary)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.samples.jaxrun import (
    count_collectives,
    main,
    mesh_yaml,
    options_from_args,
    parse_mesh,
    summarize_trace,
)

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "jax_sample_run.py"


def test_parse_mesh_fills_missing_axes_in_mesh_order() -> None:
    assert parse_mesh("tensor=2, data=4") == {"data": 4, "fsdp": 1, "tensor": 2}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model=2", "unknown mesh axis 'model'"),
        ("data=-2", "must be a positive integer, got -2"),
        ("data=0", "must be a positive integer, got 0"),
        ("data=two", "got 'two'"),
        ("data", "is not AXIS=SIZE"),
        ("data=2,data=2", "given twice"),
        ("", "empty mesh"),
    ],
)
def test_parse_mesh_rejects_bad_items(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_mesh(text)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--mesh", "data=2,fsdp=2"], "mesh data=2 x fsdp=2 x tensor=1 = 4 devices, but --devices is 8"),
        (["--mesh", "data=2,fsdp=2,expert=2"], "unknown mesh axis 'expert'"),
        (["--mesh", "data=-8"], "positive integer, got -8"),
        (["--mesh", "tensor=8"], "--heads: 4 is not divisible by tensor = 8"),
        (["--mesh", "data=8", "--batch", "12"], "--batch: 12 is not divisible by data x fsdp = 8"),
        (["--steps", "1"], "need at least one warm-up step"),
        (["--id", "other"], "must equal the run folder's name"),
    ],
)
def test_bad_arguments_exit_nonzero_with_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    rc = main(["--out", str(tmp_path / "run-x"), "--devices", "8", *extra])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: ")
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "run-x").exists()


def test_refuses_to_overwrite_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="exists and is not empty"):
        options_from_args(["--out", str(out), "--devices", "8"])
    with pytest.raises(ConfigError, match="not a run folder"):
        options_from_args(["--out", str(out), "--devices", "8", "--force"])
    assert (out / "notes.txt").read_text() == "keep me"


def test_script_reports_bad_mesh_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "r"), "--devices", "4", "--mesh", "data=2,fsdp=4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "mesh data=2 x fsdp=4 x tensor=1 = 8 devices, but --devices is 4" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_script_rejects_negative_device_count_via_argparse(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "r"), "--devices", "-4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "expected a positive integer, got -4" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_mesh_yaml_is_plain_ici_mesh() -> None:
    opts = options_from_args(["--out", "/nonexistent-parent/run-a", "--devices", "8", "--mesh", "fsdp=4,tensor=2"])
    import yaml

    assert yaml.safe_load(mesh_yaml(opts)) == {"ici_mesh": {"data": 1, "fsdp": 4, "tensor": 2}}


HLO = """\
HloModule jit_train_step, entry_computation_layout={...}
  %all-gather.1 = f32[256,2,64]{2,1,0} all-gather(%param.5), channel_id=12, replica_groups=[4,2]<=[4,2]T(1,0), dimensions={0}
  %all-reduce.65 = (f32[256,512]{1,0}, f32[512,256]{1,0}) all-reduce(%a, %b), channel_id=64, to_apply=%add.15.clone
  %ags = (f32[8]{0}, f32[16]{0}) all-gather-start(%p), dimensions={0}
  %agd = f32[16]{0} all-gather-done(%ags)
  %fusion = f32[8]{0} fusion(%all-reduce.65), kind=kLoop, calls=%fused_all-reduce_thing
"""


def test_count_collectives_counts_instructions_not_operand_names() -> None:
    assert count_collectives(HLO) == {"all-gather": 2, "all-reduce": 1}


def _trace(path: Path, events: list[dict]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump({"displayTimeUnit": "ns", "traceEvents": events}, fh)
    return path


def _op(dev: str, name: str, ts: float, dur: float, module: str = "jit_train_step") -> dict:
    args = {"device_ordinal": dev, "hlo_module": module, "hlo_op": name}
    return {"ph": "X", "pid": 1, "tid": int(dev), "ts": ts, "dur": dur, "name": name, "args": args}


def test_summarize_trace_unions_overlaps_and_splits_collectives(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "pid": 1, "tid": 9, "ts": 0, "dur": 1000, "name": "train", "args": {"step_num": "3"}},
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
        _op("0", "fusion.1", 0, 300),
        _op("0", "fusion.2", 100, 300),  # overlaps fusion.1: busy 0..400
        _op("0", "all-reduce.3", 500, 200),
        _op("1", "all-gather.1", 0, 600),
        _op("1", "dot.4", 600, 200),
        _op("1", "other", 0, 5000, module="jit_init"),  # another program: ignored
    ]
    summary = summarize_trace(_trace(tmp_path / "h.trace.json.gz", events))
    assert summary.steps == {3: 1.0}
    assert summary.devices == 2
    assert summary.op_ms_per_device == pytest.approx((0.6 + 0.8) / 2)
    assert summary.collective_ms_per_device == pytest.approx((0.2 + 0.6) / 2)
    assert summary.collective_share == pytest.approx(0.8 / 1.4)
    assert summary.top_collectives[0] == ("all-gather.1", pytest.approx(0.3))


def test_configure_xla_replaces_an_old_device_count_and_keeps_other_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.samples.jaxrun import configure_xla

    monkeypatch.delitem(sys.modules, "jax", raising=False)
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2 --xla_dump_to=/tmp/x")
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    configure_xla(8)
    import os

    assert os.environ["XLA_FLAGS"].split() == ["--xla_dump_to=/tmp/x", "--xla_force_host_platform_device_count=8"]
    assert os.environ["JAX_PLATFORMS"] == "cpu"


def test_configure_xla_refuses_once_jax_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.errors import AsapError
    from bot.samples.jaxrun import configure_xla

    monkeypatch.setitem(sys.modules, "jax", object())
    monkeypatch.setenv("XLA_FLAGS", "")
    with pytest.raises(AsapError, match="jax was imported before the virtual device count could be set"):
        configure_xla(8)
