"""Runs in Google Cloud Storage, read through gcsfs against a real GCS JSON API server on 127.0.0.1.

The server is gcp-storage-emulator (in memory), reached the way google-cloud-storage and gcsfs reach any
emulator: ``STORAGE_EMULATOR_HOST``. A run in MaxText's output layout, a documented run folder (sample
311) and an eval case on a ``gs://`` prefix must answer exactly like the same folders on local disk;
files are fetched once into the bounded cache and re-fetched only when the object's generation changes;
a missing bucket, a missing run, a broken run.yaml and a server that is down each give one clear line
naming the ``gs://`` URL, never a credential.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from store_servers import REPO, SESSION, upload_tree, write_maxtext_output

import bot.cli.analyze  # noqa: F401  (registers the commands)
import bot.cli.proposals  # noqa: F401
from bot.cli import cli
from bot.errors import AsapError, RunNotFound, StoreUnavailable
from bot.runs import cache as cache_module
from bot.runs.cache import DownloadCache
from bot.runs.fsspec_store import FsspecRunStore
from bot.runs.open import open_runs
from bot.runs.spec import parse_store

pytestmark = pytest.mark.slow
EVAL_CASE = "maxtext-a3-llama2-7b-1vm"


@pytest.fixture
def gcs_env(gcs_emulator: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    # nothing may fall back to Google's credential chain or the metadata server
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    return gcs_emulator


def _gcsfs() -> object:
    from gcsfs.core import GCSFileSystem

    GCSFileSystem.clear_instance_cache()
    return GCSFileSystem(token="anon")


@pytest.fixture
def bucket(gcs_env: str, tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A fresh bucket holding a MaxText output folder, sample run 311 and one eval case; the local twins."""
    fs = _gcsfs()
    name = f"team-runs-{os.urandom(3).hex()}"
    fs.mkdir(name)  # type: ignore[attr-defined]
    local = tmp_path / "base"
    write_maxtext_output(local / "llama-cpu")
    runs = tmp_path / "runs"
    shutil.copytree(REPO / "examples" / "runs" / "311", runs / "311")
    shutil.copytree(REPO / "examples" / "eval" / EVAL_CASE, runs / EVAL_CASE)
    upload_tree(fs, local, f"{name}/maxtext")
    upload_tree(fs, runs, f"{name}/runs")
    yield {"bucket": Path(name), "maxtext": local, "runs": runs}
    _gcsfs()


def _cli(*args: str) -> dict:
    result = CliRunner().invoke(cli, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_maxtext_output_on_gcs_answers_like_the_local_folder(bucket: dict[str, Path]) -> None:
    url = f"gs://{bucket['bucket']}/maxtext"
    remote = _cli("--runs", url, "why", "llama-cpu")
    assert remote == _cli("--runs", str(bucket["maxtext"]), "why", "llama-cpu")
    assert remote["diagnosis"]["bottleneck"] == "communication"
    run = open_runs(url).get("llama-cpu")
    assert run.record.measured and run.record.measured.step_time_ms == pytest.approx(249.35)
    assert run.record.num_chips == 8 and run.record.chip == "cpu"
    assert run.where == f"{url}/llama-cpu"


def test_documented_run_and_eval_case_on_gcs_answer_like_local(
    bucket: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"gs://{bucket['bucket']}/runs"
    assert _cli("--runs", url, "why", "run 311") == _cli("--runs", str(bucket["runs"]), "why", "run 311")
    monkeypatch.setenv("ASAP_RUNS", url)  # the operator's setting, as a serving bot reads it
    remote = _cli("propose", EVAL_CASE)
    monkeypatch.setenv("ASAP_RUNS", str(bucket["runs"]))
    local = _cli("propose", EVAL_CASE)
    assert remote.pop("elapsed_ms") >= 0 and local.pop("elapsed_ms") >= 0
    assert remote == local
    assert remote["proposals"]


def test_folder_placeholders_from_the_console_are_neither_runs_nor_files(bucket: dict[str, Path]) -> None:
    # the Cloud Console's "Create folder" writes a zero-byte object named "<folder>/"
    fs = _gcsfs()
    for folder in ("maxtext/", "maxtext/llama-cpu/", "maxtext/llama-cpu/metrics/",
                   f"maxtext/llama-cpu/tensorboard/plugins/profile/{SESSION}/"):
        fs.pipe_file(f"{bucket['bucket']}/{folder}", b"")  # type: ignore[attr-defined]
    url = f"gs://{bucket['bucket']}/maxtext"
    assert FsspecRunStore(parse_store(url)).list_ids() == ["llama-cpu"]
    assert _cli("--runs", url, "why", "llama-cpu") == _cli("--runs", str(bucket["maxtext"]), "why", "llama-cpu")


def test_documented_run_folder_fetches_only_the_files_run_yaml_names(bucket: dict[str, Path], tmp_path: Path) -> None:
    store = FsspecRunStore(parse_store(f"gs://{bucket['bucket']}/runs"), cache=DownloadCache(tmp_path / "c"))
    run = store.get("job 311")
    assert run.record.id == "311" and run.record.num_chips == 256
    assert (run.folder / "maxtext.yml").is_file() and (run.folder / "hlo_stats.json").is_file()
    manifest = json.loads((run.folder / ".asap-cache.json").read_text())
    assert set(manifest) <= {p.name for p in (bucket["runs"] / "311").iterdir()}
    assert all(v.startswith("generation:") for v in manifest.values())  # GCS's own object version


def test_listing_reads_one_level_and_downloads_nothing(
    bucket: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FsspecRunStore(parse_store(f"gs://{bucket['bucket']}/runs"), cache=DownloadCache(tmp_path / "c"))
    assert store.list_ids() == ["311", EVAL_CASE]
    assert not (tmp_path / "c").exists()
    monkeypatch.setenv("ASAP_RUNS", f"gs://{bucket['bucket']}/runs")
    rows = _cli("runs")["runs"]
    assert [r["id"] for r in rows] == ["311", EVAL_CASE]
    assert {r["where"] for r in rows} == {f"gs://{bucket['bucket']}/runs"}


def test_cache_reuses_files_until_the_object_generation_changes(bucket: dict[str, Path], tmp_path: Path) -> None:
    cache = DownloadCache(tmp_path / "cache")
    spec = parse_store(f"gs://{bucket['bucket']}/maxtext")
    first = FsspecRunStore(spec, cache=cache)
    first.get("llama-cpu")
    assert first.last_fetch and first.last_fetch.downloaded >= 6
    again = FsspecRunStore(spec, cache=cache)
    again.get("llama-cpu")
    assert again.last_fetch and again.last_fetch.downloaded == 0 and again.last_fetch.reused >= 6
    # a new version of one metrics file (new generation) is fetched again, and only it
    key = f"{bucket['bucket']}/maxtext/llama-cpu/metrics/metrics_step_000000_to_step_000004.txt"
    _gcsfs().pipe_file(key, b'{"perf/step_time_seconds": 0.5, "step": 1.0}\n' * 3)  # type: ignore[attr-defined]
    third = FsspecRunStore(spec, cache=cache)
    run = third.get("llama-cpu")
    assert third.last_fetch and third.last_fetch.files == ["metrics/metrics_step_000000_to_step_000004.txt"]
    assert run.record.measured and run.record.measured.step_time_ms == pytest.approx(500.0)


def test_a_file_over_the_size_limit_is_refused_before_any_byte_is_fetched(
    bucket: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "MAX_FILE_BYTES", 40_000)  # hlo_stats.json is 33 KB, roofline 61 KB
    store = FsspecRunStore(parse_store(f"gs://{bucket['bucket']}/runs"), cache=DownloadCache(tmp_path / "c"))
    with pytest.raises(AsapError) as err:
        store.get("311")
    text = err.value.render()
    assert text.startswith(f"gs://{bucket['bucket']}/runs/311/roofline_model.json: ") and "\n" not in text
    fetched = {p.name for p in (tmp_path / "c").rglob("*") if p.is_file()}
    assert fetched == {"run.yaml", ".asap-cache.json"}  # run.yaml only: no profile file was fetched


def test_cache_is_bounded_by_evicting_least_recently_used_runs(bucket: dict[str, Path], tmp_path: Path) -> None:
    cache = DownloadCache(tmp_path / "cache", max_bytes=1)  # smaller than any run: only the newest stays
    FsspecRunStore(parse_store(f"gs://{bucket['bucket']}/runs"), cache=cache).get("311")
    FsspecRunStore(parse_store(f"gs://{bucket['bucket']}/maxtext"), cache=cache).get("llama-cpu")
    assert [p.parent.name for p in (tmp_path / "cache").glob("*/*/.asap-cache.json")] == ["llama-cpu"]


def test_a_missing_bucket_is_named_in_one_line(gcs_env: str) -> None:
    _gcsfs()
    result = CliRunner().invoke(cli, ["--runs", "gs://no-such-bucket-asap/runs", "why", "311"])
    assert result.exit_code != 0 and isinstance(result.exception, AsapError)  # the CLI prints it, no traceback
    text = result.exception.render()
    assert "gs://no-such-bucket-asap/runs: bucket 'no-such-bucket-asap' not found" in text.splitlines()[0]


def test_a_missing_run_names_the_store_and_the_nearest_runs(bucket: dict[str, Path]) -> None:
    with pytest.raises(RunNotFound) as err:
        open_runs(f"gs://{bucket['bucket']}/runs").get("312")
    text = err.value.render()
    assert f"gs://{bucket['bucket']}/runs" in text and "311" in text.split("hint:")[-1]


def test_a_broken_run_yaml_names_its_gs_url(bucket: dict[str, Path]) -> None:
    key = f"{bucket['bucket']}/runs/311/run.yaml"
    _gcsfs().pipe_file(key, b"id: '311'\nnum_chips: [unclosed\n")  # type: ignore[attr-defined]
    with pytest.raises(AsapError) as err:
        open_runs(f"gs://{bucket['bucket']}/runs").get("311")
    text = err.value.render()
    assert text.startswith(f"gs://{key}: malformed YAML") and "\n" not in text


def test_a_server_that_is_down_fails_clearly_without_credentials_and_the_next_store_answers(
    bucket: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    import gcsfs.retry

    _gcsfs()
    # gcsfs retries a refused connection 6 times with 1, 2, 4, 8, 16 s pauses (~35 s per request, whatever
    # ASAP asks); the pauses are skipped here so the test measures the message, not gcsfs's backoff
    async def no_pause(_seconds: float) -> None:
        return None

    monkeypatch.setattr(gcsfs.retry, "asyncio", types.SimpleNamespace(sleep=no_pause))
    # nothing listens on port 9; the secret in the endpoint must never reach the message
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://asap:s3cr3t-token@127.0.0.1:9")
    chain = open_runs(f"gs://{bucket['bucket']}/maxtext,{bucket['runs']}")
    assert chain.get("311").record.id == "311"  # the local folder still answers
    with pytest.raises(RunNotFound) as err:
        chain.get("llama-cpu")
    text = err.value.render()
    assert f"gs://{bucket['bucket']}/maxtext" in text and "unreachable" in text
    assert "s3cr3t" not in text


def test_untrusted_names_never_leave_the_prefix(bucket: dict[str, Path]) -> None:
    store = FsspecRunStore(parse_store(f"gs://{bucket['bucket']}/maxtext"))
    for query in ("../runs/311", "llama-cpu/../../x", "a/b", "%2e%2e"):
        with pytest.raises(RunNotFound):
            store.get(query)


def test_store_errors_are_store_unavailable(bucket: dict[str, Path]) -> None:
    with pytest.raises(StoreUnavailable) as err:
        FsspecRunStore(parse_store("gs://no-such-bucket-asap/x")).list_ids()
    assert err.value.render().startswith("gs://no-such-bucket-asap/x: bucket 'no-such-bucket-asap' not found")
    assert FsspecRunStore(parse_store(f"gs://{bucket['bucket']}/no-runs-yet")).list_ids() == []


def test_a_jax_logdir_on_gcs_is_one_run_like_the_local_logdir(bucket: dict[str, Path], tmp_path: Path) -> None:
    logdir = tmp_path / "tb" / "llama-cpu"
    shutil.copytree(bucket["maxtext"] / "llama-cpu" / "tensorboard", logdir)
    shutil.copy(bucket["maxtext"] / "llama-cpu" / "config.yml", logdir)
    upload_tree(_gcsfs(), logdir, f"{bucket['bucket']}/logs/llama-cpu")
    url = f"tb:gs://{bucket['bucket']}/logs/llama-cpu"
    assert FsspecRunStore(parse_store(url)).list_ids() == ["llama-cpu"]
    remote = _cli("--runs", url, "why", "llama-cpu")
    assert remote == _cli("--runs", f"tb:{logdir}", "why", "llama-cpu")
    assert remote["diagnosis"]["bottleneck"] == "communication"
