"""Real servers for the run-store tests, started by the tests on 127.0.0.1 free ports.

- an S3-compatible server: ``moto`` in server mode (``moto_server``), reached through ``s3fs`` with the
  standard ``AWS_ENDPOINT_URL_S3`` variable, as a team would point ASAP at MinIO or a regional endpoint;
- an MLflow tracking server: ``mlflow server`` with a SQLite backend and a local artifact destination;
- a GCS-compatible server: ``gcp-storage-emulator`` (the GCS JSON API, in memory), reached through gcsfs
  with the standard ``STORAGE_EMULATOR_HOST`` variable, as google-cloud-storage and gcsfs honour it.

Each fixture skips with the reason when its server cannot start (package missing, no port), and stops
its server afterwards. A MaxText output folder is built from the real JAX sample run's profile
(examples/runs/jax-cpu-8dev), so the same bytes can be read locally, from S3 and from MLflow.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "runs" / "jax-cpu-8dev"
SESSION = "2026_11_21_05_24_53"
STEP_TIMES_S = [9.1, 0.2486, 0.2501, 0.2470, 0.2512]  # step 0 includes compilation, as in MaxText logs
MAXTEXT_CONFIG = {
    "run_name": "llama-cpu", "model_name": "default", "hardware": "cpu",
    "base_emb_dim": 256, "base_mlp_dim": 1024, "base_num_query_heads": 4, "base_num_kv_heads": 4,
    "base_num_decoder_layers": 2, "head_dim": 64, "vocab_size": 1024, "per_device_batch_size": 2.0,
    "max_target_length": 128, "remat_policy": "full", "dtype": "float32",
    "mesh_axes": ["data", "fsdp", "tensor"],
    "ici_data_parallelism": 2, "ici_fsdp_parallelism": 2, "ici_tensor_parallelism": 2,
    "dcn_data_parallelism": 1, "dcn_fsdp_parallelism": 1, "dcn_tensor_parallelism": 1, "num_slices": 1,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_maxtext_output(run_dir: Path, *, with_config: bool = True) -> Path:
    """``<base>/<run>/``: config.yml, metrics/metrics_step_*.txt, tensorboard/plugins/profile/<session>/."""
    import yaml

    session = run_dir / "tensorboard" / "plugins" / "profile" / SESSION
    session.mkdir(parents=True)
    shutil.copy(SAMPLE / "plugins" / "profile" / SESSION / "vm.trace.json.gz", session)
    for name in ("overview_page.json", "op_profile.json", "hlo_stats.json", "roofline_model.json"):
        shutil.copy(SAMPLE / name, session)
    if with_config:
        (run_dir / "config.yml").write_text(yaml.safe_dump(MAXTEXT_CONFIG, sort_keys=False), encoding="utf-8")
    metrics = run_dir / "metrics"
    metrics.mkdir()
    lines = [json.dumps({"perf/step_time_seconds": t, "perf/per_device_tokens_per_sec": 256 / t,
                         "learning/loss": 3.0, "step": float(s), "run_name": run_dir.name})
             for s, t in enumerate(STEP_TIMES_S)]
    (metrics / "metrics_step_000000_to_step_000004.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run_dir


def _wait(url: str, proc: subprocess.Popen[bytes], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=1):
                return True
        except OSError:
            time.sleep(0.3)
    return False


def _start(args: list[str], url: str, log: Path, seconds: float) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    if not _wait(url, proc, seconds):
        proc.kill()
        proc.wait()
        pytest.skip(f"{args[0]} did not start on 127.0.0.1 within {seconds:.0f} s: {log.read_text()[-300:]}")
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server started by :func:`_start`: terminate, and kill it if it has not exited within 15 s."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An S3-compatible endpoint (moto server mode); yields its URL."""
    pytest.importorskip("moto.server", reason="moto[server] is not installed (dev extra)")
    pytest.importorskip("s3fs", reason="s3fs is not installed (s3 extra)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    proc = _start([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], f"{url}/moto-api/", log, 30)
    yield url
    _stop(proc)


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An MLflow tracking server (SQLite backend, local artifact destination); yields its http URL."""
    pytest.importorskip("mlflow", reason="mlflow is not installed (mlflow extra)")
    folder = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{folder / 'db.sqlite'}",
            "--artifacts-destination", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
            "--workers", "1"]
    proc = _start(args, f"{url}/health", folder / "server.log", 90)
    yield url
    _stop(proc)


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A GCS JSON API endpoint (gcp-storage-emulator, in memory); yields its http URL."""
    pytest.importorskip("gcp_storage_emulator", reason="gcp-storage-emulator is not installed (dev extra)")
    pytest.importorskip("gcsfs", reason="gcsfs is not installed (gcs extra)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("gcs") / "gcs.log"
    args = [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port", str(port),
            "--in-memory", "--quiet"]
    proc = _start(args, f"{url}/", log, 30)
    yield url
    _stop(proc)


def upload_tree(fs: object, local: Path, remote: str) -> None:
    """Every file under ``local`` to ``remote/<relative path>`` through an fsspec filesystem."""
    for path in sorted(local.rglob("*")):
        if path.is_file():
            fs.pipe_file(f"{remote}/{path.relative_to(local).as_posix()}", path.read_bytes())  # type: ignore[attr-defined]
