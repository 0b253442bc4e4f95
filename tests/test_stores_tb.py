"""`tb:LOGDIR`: a TensorBoard / JAX profiler logdir written by a real ``jax.profiler.trace``.

The logdir holds ``plugins/profile/<session>/*.xplane.pb`` (converted by the xprof extra) with a config
beside it; ASAP lists it, reads the chip from the profile's own device description and the chip count from
the config's mesh, and answers. A logdir of several runs lists each; ``--session`` picks an older session.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.analyze  # noqa: F401  (registers the commands)
from bot.cli import cli
from bot.errors import AsapError
from bot.runs.open import open_runs

pytestmark = [pytest.mark.slow, pytest.mark.jax]

TRACE = """
import sys, jax, jax.numpy as jnp
x = jnp.ones((256, 256))
f = jax.jit(lambda a: (a @ a).sum())
f(x).block_until_ready()
with jax.profiler.trace(sys.argv[1]):
    for step in range(3):
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            f(x).block_until_ready()
"""
CONFIG = "ici_data_parallelism: 1\nici_fsdp_parallelism: 1\ndcn_data_parallelism: 1\nper_device_batch_size: 1\n"


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("jax", reason="needs the jax extra")
    pytest.importorskip("xprof", reason="needs the xprof extra to convert *.xplane.pb")
    root = tmp_path_factory.mktemp("tb")
    for name in ("exp1", "exp2"):
        subprocess.run([sys.executable, "-c", TRACE, str(root / name)], check=True, timeout=240,
                       capture_output=True)
        (root / name / "config.yml").write_text(CONFIG, encoding="utf-8")
    return root


def test_single_logdir_is_one_run_read_from_the_real_trace(logdir: Path) -> None:
    store = open_runs(f"tb:{logdir / 'exp1'}")
    assert store.list_ids() == ["exp1"]
    run = store.get("exp1")
    assert run.record.chip == "cpu" and run.record.num_chips == 1
    session = next((logdir / "exp1" / "plugins" / "profile").iterdir()).name
    assert run.record.profile == [f"plugins/profile/{session}"]
    result = CliRunner().invoke(cli, ["--runs", f"tb:{logdir / 'exp1'}", "why", "exp1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["kpis"]["step_time_ms"] > 0


def test_logdir_of_runs_lists_each(logdir: Path) -> None:
    result = CliRunner().invoke(cli, ["--runs", f"tb:{logdir}", "runs", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["runs"]
    assert [r["id"] for r in rows] == ["exp1", "exp2"] and rows[0]["chip"] == "cpu"


def test_unknown_session_names_the_sessions_there(logdir: Path) -> None:
    with pytest.raises(AsapError) as err:
        open_runs(f"tb:{logdir}").get("exp2", session="1999_01_01_00_00_00")
    assert "no profile session" in err.value.render() and "sessions here" in err.value.render()
