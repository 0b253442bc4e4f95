"""Store URLs as operators write them (ASAP_RUNS / --runs), and what a bad one says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.analyze  # noqa: F401  (registers the commands)
from bot.cli import cli
from bot.errors import AsapError
from bot.runs.open import open_runs
from bot.runs.spec import parse_store, parse_stores


def test_each_kind_of_location_is_recognised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    specs = parse_stores("/data/runs, s3://ml-runs/maxtext,gs://b/p/,mlflow+https://mlflow.corp/pretrain,mlflow,tb:/logs/x")
    assert [(s.kind, s.location, s.experiment) for s in specs] == [
        ("dir", "/data/runs", None), ("object", "s3://ml-runs/maxtext", None), ("object", "gs://b/p", None),
        ("mlflow", "https://mlflow.corp", "pretrain"), ("mlflow", "http://127.0.0.1:5000", None), ("tb", "/logs/x", None),
    ]


@pytest.mark.parametrize(("text", "says"), [
    ("ftp://host/x", "unknown store scheme 'ftp'"),
    ("s3://", "names no bucket"),
    ("mlflow+http://user:pw@host:5000", "may not carry credentials"),
    ("mlflow+file:///x", "not an MLflow store URL"),
    ("tb:", "tb: needs a logdir"),
])
def test_bad_locations_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(AsapError) as err:
        parse_store(text)
    assert says in err.value.render() and "pw" not in err.value.render()


def test_mlflow_alone_needs_the_tracking_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(AsapError) as err:
        parse_store("mlflow")
    assert "MLFLOW_TRACKING_URI" in err.value.render()


def test_runs_option_applies_to_that_command_only(example_runs: Path, tmp_path: Path) -> None:
    """--runs is one command's setting: it must not leak into the process environment (and later commands)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    before = os.environ.get("ASAP_RUNS")
    result = CliRunner().invoke(cli, ["--runs", str(empty), "runs", "--json"])
    assert result.exit_code == 0, result.output
    assert os.environ.get("ASAP_RUNS") == before
    assert "311" in open_runs(runs_dir=str(example_runs)).list_ids()


def test_every_store_failing_is_the_answer_not_an_empty_list(tmp_path: Path) -> None:
    with pytest.raises(AsapError) as err:
        open_runs(str(tmp_path / "nowhere")).list_page(10)
    assert "does not exist" in err.value.render()
