"""The wheel carries what an installed ASAP reads (playbooks, prompts, sample runs), and a team's own
playbooks folder (ASAP_PLAYBOOKS_DIR) replaces the bundled one.

The full check (install the wheel with its dependencies into a fresh venv outside the checkout and run
the commands) is ``scripts/wheel_check.sh``, run by ``scripts/test.sh``; this test builds the wheel
offline and inspects it, so a packaging slip fails here in seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLI = "from bot.cli import main; main()"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(REPO)],
        capture_output=True, text=True, timeout=240, check=False,
    )
    if proc.returncode != 0 and "No module named" in proc.stderr and "setuptools" in proc.stderr:
        pytest.skip("setuptools is not installed in this environment; cannot build the wheel offline")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = out.glob("asap-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_ships_playbooks_prompts_and_sample_runs(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for book in (REPO / "playbooks").glob("*.md"):
        assert f"bot/_bundled/playbooks/{book.name}" in names
    for prompt in (REPO / "agents" / "prompts").glob("*.md"):
        assert f"agents/prompts/{prompt.name}" in names
    for run_file in (REPO / "examples" / "runs").rglob("*"):
        if run_file.is_file():
            rel = run_file.relative_to(REPO / "examples" / "runs").as_posix()
            assert f"bot/_bundled/runs/{rel}" in names
    assert "knowledge/data/hardware.yaml" in names
    # the top-level folders are mapped into the package, not installed as top-level names in site-packages
    assert not any(n.startswith(("playbooks/", "examples/")) for n in names)
    assert not any("__pycache__" in n for n in names)


def test_team_playbooks_dir_replaces_the_bundled_one(tmp_path: Path) -> None:
    """ASAP_PLAYBOOKS_DIR is read: a team folder with one extra advice move shows up in the proposals."""
    books = tmp_path / "team-books"
    books.mkdir()
    for book in (REPO / "playbooks").glob("*.md"):
        (books / book.name).write_text(book.read_text(encoding="utf-8"), encoding="utf-8")
    (books / "team.md").write_text(
        "# Team rules\n\n## Check the input pipeline first\n\nOur loaders stall.\n\n"
        "```yaml asap-move\nid: team-check-loader\npriority: 99\nwhen: {bottleneck: [communication]}\n"
        "advice: Check the team data loader first.\nrationale: Our loaders stall.\ntradeoffs: none\n"
        "source: team wiki\n```\n",
        encoding="utf-8",
    )
    env = {**os.environ, "ASAP_PLAYBOOKS_DIR": str(books), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", CLI, "propose", "311", "--json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    advice = json.loads(proc.stdout)["advice"]
    assert any(a["id"] == "team-check-loader" and a["citation"].startswith("team-books/team.md#") for a in advice)

    env["ASAP_PLAYBOOKS_DIR"] = str(tmp_path / "missing")
    proc = subprocess.run([sys.executable, "-c", CLI, "propose", "311"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 2
    assert "playbooks folder not found" in proc.stderr and "ASAP_PLAYBOOKS_DIR" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_docker_build_stage_copies_what_the_wheel_maps() -> None:
    """The image builds its wheel from a partial copy of the repo: it must copy setup.py and the bundled folders."""
    build = (REPO / "Dockerfile").read_text().split("FROM ", 2)[1]
    copies = " ".join(line for line in build.splitlines() if line.startswith("COPY "))
    assert "setup.py" in copies
    for folder in ("playbooks", "examples/runs", "bot", "agents", "integrations", "knowledge"):
        assert f" {folder} " in copies, folder
