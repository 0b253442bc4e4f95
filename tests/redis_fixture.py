"""Real Redis for the runtime tests: the shared server on 6379, or a throwaway one, or a clear skip.

Every test gets its own key prefix (``ASAP_QUEUE_PREFIX``), so tests running side by side (and other
helpers' tests on the same server) never see each other's streams; the keys are deleted afterwards.
:class:`RedisServer` starts a private ``redis-server`` on a free port that a test may stop and restart
(the stop-Redis test never touches the shared server).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

SHARED_PORT = 6379


def reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A private redis-server process (AOF on, so a restart keeps the queue like a production setup)."""

    def __init__(self, folder: Path, *, port: int | None = None, persist: bool = True) -> None:
        binary = shutil.which("redis-server")
        if not binary:
            pytest.skip("redis-server is not installed; cannot start a private Redis")
        self.binary = binary
        self.folder = folder
        self.port = port or free_port()
        self.persist = persist
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
                "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "always"] if self.persist else ["--appendonly", "no"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if reachable(self.port):
                return
            time.sleep(0.025)
        self.stop()
        pytest.skip(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


@pytest.fixture(scope="session")
def redis_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The shared Redis when it answers, else a throwaway redis-server, else skip with the reason."""
    if reachable(SHARED_PORT):
        yield f"redis://127.0.0.1:{SHARED_PORT}/0"
        return
    if not shutil.which("redis-server"):
        pytest.skip(f"no Redis on 127.0.0.1:{SHARED_PORT} and no redis-server binary to start one")
    server = RedisServer(tmp_path_factory.mktemp("redis"), persist=False)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_env(redis_server_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Environment for a runtime on the real Redis, under a key prefix of its own."""
    prefix = f"asaptest:{uuid.uuid4().hex[:10]}:"
    env = {"REDIS_URL": redis_server_url, "ASAP_QUEUE_PREFIX": prefix, "ASAP_STATE_DIR": str(tmp_path / "state")}
    yield env
    client = redis.Redis.from_url(redis_server_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i:i + 500])
    finally:
        client.close()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A private Redis this test may stop and start again (same port, AOF keeps the data)."""
    folder = tmp_path / "own-redis"
    folder.mkdir()
    server = RedisServer(folder)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# ------------------------------------------------------------------------------------------- runtime helpers
REPO = Path(__file__).resolve().parents[1]
HANDLERS_DIR = REPO / "tests" / "data" / "runtime"


def make_job(n: int | str = 0, *, kind: str = "review", user: str | None = None, thread: str | None = None,
             **payload: object):  # type: ignore[no-untyped-def]
    """A ``cli`` job for the scripted handler (``payload`` steers it: sleep, sleep_first, fail_times...)."""
    from bot.runtime.jobs import Job, Requester

    return Job(id=f"cli:test-{uuid.uuid4().hex[:8]}-{n}", source="cli", kind=kind,  # type: ignore[arg-type]
               thread=thread or f"cli:t{n}", requester=Requester(source="cli", user_id=user or f"u{n}"),
               payload=dict(payload))


async def wait_until(predicate, timeout: float = 10.0, every: float = 0.02) -> bool:  # type: ignore[no-untyped-def]
    """Poll an async or plain predicate until it is true or ``timeout`` passes."""
    import asyncio
    import inspect

    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return True
        if time.monotonic() > end:
            return False
        await asyncio.sleep(every)


def worker_command(*args: str) -> list[str]:
    """Run ``asap worker`` in a subprocess (registers the runtime commands even before the CLI lists them)."""
    import sys

    code = "import sys; import bot.cli.runtime; from bot.cli import main; main(sys.argv[1:])"
    return [sys.executable, "-c", code, *args]


def worker_env(env: dict[str, str], name: str) -> dict[str, str]:
    import os

    out = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL",)}
    out.update(env)
    out["PYTHONPATH"] = f"{HANDLERS_DIR}{os.pathsep}{out.get('PYTHONPATH', '')}"
    out["ASAP_TEST_WORKER"] = name
    out["ASAP_HANDLER_MODULES"] = "runtime_handlers"
    return out
