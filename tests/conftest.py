"""Shared test fixtures: paths to the bundled sample runs and a temporary runs folder."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_RUNS = REPO / "examples" / "runs"


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def example_runs() -> Path:
    return EXAMPLE_RUNS
