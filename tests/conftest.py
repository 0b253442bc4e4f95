"""Shared test fixtures: paths to the bundled sample runs, and isolated state.

Every test session gets its own ASAP_STATE_DIR (memory store, worklog, knowledge index, history), so no
test reads or writes the developer's ``.asap/`` and two test runs never share state. Tests that need a
specific folder still set it with ``monkeypatch.setenv``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from store_servers import gcs_emulator, mlflow_server, moto_s3  # noqa: F401  (real GCS, S3, MLflow servers, on demand)

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_RUNS = REPO / "examples" / "runs"


def pytest_configure(config: pytest.Config) -> None:
    state = tempfile.mkdtemp(prefix="asap-test-state-")
    os.environ["ASAP_STATE_DIR"] = state
    for var in ("OPENAI_API_KEY", "ASAP_MODEL_BASE_URL", "ASAP_RUNS_DIR", "ASAP_RUNS"):
        os.environ.pop(var, None)


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def example_runs() -> Path:
    return EXAMPLE_RUNS
