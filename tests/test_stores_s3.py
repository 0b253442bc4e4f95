"""Runs in S3-compatible object storage, read through s3fs against a real moto server on 127.0.0.1.

A run written in MaxText's own output layout (config.yml, metrics/, tensorboard/plugins/profile/<session>/)
on an S3 prefix must give the same `asap why` answer as the same folder on local disk; files are fetched
once into the bounded cache and re-fetched only when the object's ETag changes; listing never downloads
run files; a store that is down fails clearly without breaking the next store.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from store_servers import REPO, write_maxtext_output

import bot.cli.analyze  # noqa: F401  (registers the commands)
from bot.cli import cli
from bot.errors import AsapError, RunNotFound
from bot.runs.cache import DownloadCache
from bot.runs.fsspec_store import FsspecRunStore
from bot.runs.open import open_runs
from bot.runs.spec import parse_store

pytestmark = pytest.mark.slow
BUCKET = "team-runs"


@pytest.fixture
def s3_env(moto_s3: str, monkeypatch: pytest.MonkeyPatch) -> str:
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": moto_s3}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return moto_s3


@pytest.fixture
def bucket(s3_env: str, tmp_path: Path) -> dict[str, Path]:
    """Upload a MaxText output folder and a documented run folder (sample 311); return the local twins."""
    import boto3
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    s3 = boto3.client("s3")
    name = f"{BUCKET}-{os.urandom(3).hex()}"
    s3.create_bucket(Bucket=name)
    local = tmp_path / "base"
    write_maxtext_output(local / "llama-cpu")
    shutil.copytree(REPO / "examples" / "runs" / "311", tmp_path / "runs" / "311")
    for root, sub in ((local, "maxtext"), (tmp_path / "runs", "runs")):
        for path in root.rglob("*"):
            if path.is_file():
                s3.upload_file(str(path), name, f"{sub}/{path.relative_to(root).as_posix()}")
    return {"bucket": Path(name), "maxtext": local, "runs": tmp_path / "runs"}


def _why(runs: str) -> dict:
    result = CliRunner().invoke(cli, ["--runs", runs, "why", "llama-cpu", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_maxtext_output_on_s3_answers_like_the_local_folder(bucket: dict[str, Path], tmp_path: Path) -> None:
    remote = _why(f"s3://{bucket['bucket']}/maxtext")
    local = _why(str(bucket["maxtext"]))
    assert remote == local
    assert remote["diagnosis"]["bottleneck"] == "communication"
    # measured step time is the median of MaxText's logged perf/step_time_seconds after step 0 (compile)
    run = open_runs(f"s3://{bucket['bucket']}/maxtext").get("llama-cpu")
    assert run.record.measured and run.record.measured.step_time_ms == pytest.approx(249.35)
    assert run.record.num_chips == 8 and run.record.chip == "cpu"
    assert run.where == f"s3://{bucket['bucket']}/maxtext/llama-cpu"


def test_documented_run_folder_on_s3_reads_its_named_files(bucket: dict[str, Path]) -> None:
    store = FsspecRunStore(parse_store(f"s3://{bucket['bucket']}/runs"))
    run = store.get("run 311")
    assert run.record.id == "311" and run.record.num_chips == 256
    fetched = sorted(store.last_fetch.files) if store.last_fetch else []
    assert "run.yaml" not in fetched or len(fetched) > 1
    assert (run.folder / "maxtext.yml").is_file() and (run.folder / "hlo_stats.json").is_file()


def test_cache_reuses_files_until_the_object_changes(bucket: dict[str, Path], tmp_path: Path) -> None:
    import boto3

    cache = DownloadCache(tmp_path / "cache")
    spec = parse_store(f"s3://{bucket['bucket']}/maxtext")
    first = FsspecRunStore(spec, cache=cache)
    first.get("llama-cpu")
    assert first.last_fetch and first.last_fetch.downloaded >= 6
    again = FsspecRunStore(spec, cache=cache)
    again.get("llama-cpu")
    assert again.last_fetch and again.last_fetch.downloaded == 0 and again.last_fetch.reused >= 6
    # a new metrics file version (new ETag) is fetched again, and only it
    key = "maxtext/llama-cpu/metrics/metrics_step_000000_to_step_000004.txt"
    boto3.client("s3").put_object(Bucket=str(bucket["bucket"]), Key=key,
                                  Body=b'{"perf/step_time_seconds": 0.5, "step": 1.0}\n' * 3)
    third = FsspecRunStore(spec, cache=cache)
    run = third.get("llama-cpu")
    assert third.last_fetch and third.last_fetch.files == ["metrics/metrics_step_000000_to_step_000004.txt"]
    assert run.record.measured and run.record.measured.step_time_ms == pytest.approx(500.0)


def test_cache_is_bounded_by_evicting_least_recently_used_runs(bucket: dict[str, Path], tmp_path: Path) -> None:
    cache = DownloadCache(tmp_path / "cache", max_bytes=1)  # smaller than any run: only the newest stays
    FsspecRunStore(parse_store(f"s3://{bucket['bucket']}/runs"), cache=cache).get("311")
    FsspecRunStore(parse_store(f"s3://{bucket['bucket']}/maxtext"), cache=cache).get("llama-cpu")
    kept = [p.parent.name for p in (tmp_path / "cache").glob("*/*/.asap-cache.json")]
    assert kept == ["llama-cpu"]


def test_listing_reads_one_level_and_downloads_nothing(bucket: dict[str, Path], tmp_path: Path) -> None:
    cache = DownloadCache(tmp_path / "cache")
    store = FsspecRunStore(parse_store(f"s3://{bucket['bucket']}/maxtext"), cache=cache)
    assert store.list_ids() == ["llama-cpu"]
    assert not (tmp_path / "cache").exists()
    result = CliRunner().invoke(cli, ["--runs", f"s3://{bucket['bucket']}/maxtext", "runs", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["runs"]
    assert [r["id"] for r in rows] == ["llama-cpu"] and rows[0]["where"] == f"s3://{bucket['bucket']}/maxtext"


@pytest.mark.parametrize("query", ["../runs/311", "llama-cpu/../../x", "a/b", "%2e%2e"])
def test_untrusted_names_never_leave_the_prefix(bucket: dict[str, Path], query: str) -> None:
    store = FsspecRunStore(parse_store(f"s3://{bucket['bucket']}/maxtext"))
    with pytest.raises(RunNotFound):
        store.get(query)


def test_a_store_that_is_down_fails_clearly_and_the_next_store_answers(
    bucket: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")  # nothing listens there
    chain = open_runs(f"s3://{bucket['bucket']}/maxtext,{bucket['runs']}")
    run = chain.get("311")  # the local folder still answers
    assert run.record.id == "311"
    with pytest.raises(RunNotFound) as err:
        chain.get("llama-cpu")
    text = err.value.render()
    assert f"s3://{bucket['bucket']}/maxtext" in text and "unreachable" in text
    assert "testing" not in text  # never a credential


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    registry = sys.modules["fsspec.registry"]
    monkeypatch.setitem(registry.known_implementations, "gs",
                        {"class": "gcsfs_not_installed.GCSFileSystem", "err": "install gcsfs"})
    monkeypatch.delitem(registry._registry, "gs", raising=False)
    with pytest.raises(AsapError) as err:
        FsspecRunStore(parse_store("gs://bucket/prefix"))
    assert "gcsfs" in err.value.render() and "asap[gcs]" in err.value.render()


def test_a_missing_bucket_and_console_folder_placeholders_on_s3(bucket: dict[str, Path]) -> None:
    import boto3

    with pytest.raises(AsapError) as err:
        FsspecRunStore(parse_store("s3://no-such-bucket-asap/runs")).list_ids()
    assert err.value.render().startswith("s3://no-such-bucket-asap/runs: bucket 'no-such-bucket-asap' not found")
    # the S3 console's "Create folder" writes a zero-byte "<folder>/" object: neither a run nor a run's file
    for key in ("maxtext/", "maxtext/llama-cpu/", "maxtext/llama-cpu/metrics/"):
        boto3.client("s3").put_object(Bucket=str(bucket["bucket"]), Key=key, Body=b"")
    store = FsspecRunStore(parse_store(f"s3://{bucket['bucket']}/maxtext"))
    assert store.list_ids() == ["llama-cpu"]
    assert _why(f"s3://{bucket['bucket']}/maxtext") == _why(str(bucket["maxtext"]))
