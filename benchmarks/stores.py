"""Run-store speed: lookup and first-answer time per store, the cached repeat, and MLflow listing at scale.

Starts real servers on 127.0.0.1 (moto's S3 server, gcp-storage-emulator's GCS JSON API, an MLflow
tracking server with a SQLite backend), writes the same MaxText output folder (the real JAX sample run's
profile) to a local folder, S3, GCS, MLflow and a tb: logdir, then times ``open_runs(URL).get(name)`` + ``analyze_run`` cold (empty cache) and warm.
It then creates N MLflow runs (default 10,000) and times paging through them with ``asap runs``' page
size. Goals (issue 15): first answer < 2 s on a local server, repeat < 0.5 s from cache.

    python benchmarks/stores.py [--mlflow-runs 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from store_servers import MAXTEXT_CONFIG, STEP_TIMES_S, free_port, write_maxtext_output  # noqa: E402


def _start(args: list[str], url: str, seconds: float = 90) -> subprocess.Popen[bytes]:
    import urllib.request

    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"{args[:3]} did not start")


def _seed_s3(endpoint: str, local: Path) -> str:
    import boto3

    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": endpoint})
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="bench-runs")
    for path in local.rglob("*"):
        if path.is_file():
            s3.upload_file(str(path), "bench-runs", f"maxtext/llama-cpu/{path.relative_to(local).as_posix()}")
    return "s3://bench-runs/maxtext"


def _seed_gcs(endpoint: str, local: Path) -> str:
    os.environ.update({"STORAGE_EMULATOR_HOST": endpoint, "NO_GCE_CHECK": "true"})
    from gcsfs.core import GCSFileSystem

    fs = GCSFileSystem(token="anon")
    fs.mkdir("bench-runs")
    for path in local.rglob("*"):
        if path.is_file():
            fs.pipe_file(f"bench-runs/maxtext/llama-cpu/{path.relative_to(local).as_posix()}", path.read_bytes())
    return "gs://bench-runs/maxtext"


def _seed_mlflow(url: str, local: Path) -> str:
    import mlflow

    mlflow.set_tracking_uri(url)
    mlflow.set_experiment("bench")
    with mlflow.start_run(run_name="llama-cpu"):
        mlflow.log_params(MAXTEXT_CONFIG)
        mlflow.set_tags({"asap.chip": "cpu", "asap.num_chips": "8"})
        for step, seconds in enumerate(STEP_TIMES_S):
            mlflow.log_metric("perf/step_time_seconds", seconds, step=step)
        mlflow.log_artifacts(str(local / "tensorboard"), artifact_path="tensorboard")
    return f"mlflow+{url}/bench"


def _answer(store_url: str) -> tuple[float, float]:
    """(lookup seconds, lookup + analysis seconds) for one question about run llama-cpu."""
    from bot.analysis.analyze import analyze_run
    from bot.runs.open import open_runs

    t0 = time.perf_counter()
    run = open_runs(store_url).get("llama-cpu")
    lookup = time.perf_counter() - t0
    report = analyze_run(run)
    assert report.diagnosis.bottleneck is not None
    return lookup, time.perf_counter() - t0


def _time_store(name: str, url: str, repeat: int, state: Path) -> None:
    shutil.rmtree(state / "cache", ignore_errors=True)
    cold_lookup, cold = _answer(url)
    warm = [_answer(url) for _ in range(repeat)]
    print(f"{name:<7} first: lookup {cold_lookup * 1000:6.0f} ms, answer {cold * 1000:6.0f} ms | "
          f"repeat (cached) median: lookup {statistics.median(w[0] for w in warm) * 1000:6.0f} ms, "
          f"answer {statistics.median(w[1] for w in warm) * 1000:6.0f} ms")


def _many_mlflow_runs(url: str, n: int) -> str:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(url)
    exp = client.create_experiment(f"many-{os.urandom(3).hex()}")

    def make(i: int) -> None:
        client.create_run(exp, run_name=f"sweep-{i:05d}", tags={"asap.chip": "tpu-v5p", "asap.num_chips": "64"})

    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(make, range(n)))
    print(f"(created {n} MLflow runs in {time.perf_counter() - t0:.1f} s)")
    return exp


def _page_mlflow(url: str, exp: str, n: int, limit: int) -> None:
    import resource

    from bot.runs.mlflow_store import MlflowRunStore
    from bot.runs.spec import parse_store

    store = MlflowRunStore(parse_store(f"mlflow+{url}/{exp}"))
    t0 = time.perf_counter()
    rows, token = store.list_page(limit)
    first = time.perf_counter() - t0
    ids = [r["mlflow_run_id"] for r in rows]
    pages = 1
    while token:
        rows, token = store.list_page(limit, token)
        ids += [r["mlflow_run_id"] for r in rows]
        pages += 1
    seen = len(ids)
    total = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # the client retries a create_run that timed out under load, so the server may hold a few more than n
    print(f"mlflow list: first page of {limit} in {first * 1000:.0f} ms; {seen} rows ({len(set(ids))} distinct runs; "
          f"{n} created) in {pages} pages, "
          f"{total:.1f} s ({total / pages * 1000:.0f} ms/page); peak RSS {rss:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlflow-runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--page", type=int, default=100)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="asap-bench-stores-"))
    os.environ["ASAP_STATE_DIR"] = str(tmp / "state")
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    local = write_maxtext_output(tmp / "runs" / "llama-cpu")
    logdir = tmp / "tb" / "llama-cpu"
    shutil.copytree(local / "tensorboard", logdir)
    shutil.copy(local / "config.yml", logdir)
    s3_port, gs_port, ml_port = free_port(), free_port(), free_port()
    procs = [
        _start([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(s3_port)],
               f"http://127.0.0.1:{s3_port}/moto-api/"),
        _start([sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port", str(gs_port),
                "--in-memory", "--quiet"], f"http://127.0.0.1:{gs_port}/"),
        _start([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{tmp / 'mlflow.db'}",
                "--artifacts-destination", str(tmp / "artifacts"), "--host", "127.0.0.1", "--port", str(ml_port),
                "--workers", "2"], f"http://127.0.0.1:{ml_port}/health"),
    ]
    try:
        stores = {
            "local": str(tmp / "runs"),
            "tb": f"tb:{logdir}",
            "s3": _seed_s3(f"http://127.0.0.1:{s3_port}", local),
            "gs": _seed_gcs(f"http://127.0.0.1:{gs_port}", local),
            "mlflow": _seed_mlflow(f"http://127.0.0.1:{ml_port}", local),
        }
        _answer(stores["local"])  # imports and first-use costs paid once, outside the timings
        t0 = time.perf_counter()
        import mlflow.tracking  # noqa: F401  (a serving bot imports its store clients once per process)
        import s3fs  # noqa: F401
        print(f"(one-time client imports per process: mlflow + s3fs {time.perf_counter() - t0:.2f} s; gcsfs was "
              "imported to seed the bucket)")
        for name, url in stores.items():
            _time_store(name, url, args.repeat, tmp / "state")
        if args.mlflow_runs:
            exp = _many_mlflow_runs(f"http://127.0.0.1:{ml_port}", args.mlflow_runs)
            _page_mlflow(f"http://127.0.0.1:{ml_port}", exp, args.mlflow_runs, args.page)
    finally:
        for p in procs:
            p.terminate()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
