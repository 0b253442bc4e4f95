"""`asap apply` refuses a config file that is not the run's own (other chip count, mesh or settings)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.apply import apply_proposal
from bot.cli import main
from bot.errors import AsapError
from integrations.codehost.localgit import LocalGitHost

RUNS = Path(__file__).resolve().parents[1] / "examples" / "runs"
CFG_123 = (RUNS / "123" / "maxtext.yml").read_text()
CFG_311 = (RUNS / "311" / "maxtext.yml").read_text()  # 256 chips, fsdp=16 tensor=16, llama2-13b


def _repo(tmp_path: Path, text: str) -> Path:
    r = tmp_path / "llm"
    subprocess.run(["git", "init", "-q", "-b", "main", str(r)], check=True)
    (r / "configs").mkdir()
    (r / "configs" / "model.yml").write_text(text)
    subprocess.run(["git", "-C", str(r), "add", "."], check=True)
    subprocess.run(["git", "-C", str(r), "-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qm", "init"],
                   check=True)
    return r


def _branches(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "branch", "--list"], capture_output=True, text=True, check=True).stdout


def test_another_runs_config_with_another_chip_count_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path, CFG_311)
    with pytest.raises(AsapError) as info:
        apply_proposal("123", 1, None, LocalGitHost(repo), config_path="configs/model.yml")
    text = info.value.render()
    assert "configs/model.yml is not run 123's config" in text and "64 chips" in text
    assert "fsdp=64" in text  # the run's own mesh is shown beside the problem
    assert "asap/" not in _branches(repo)  # nothing committed


def test_same_chip_count_but_other_mesh_and_settings_is_refused_showing_both(tmp_path: Path) -> None:
    foreign = (CFG_123.replace("ici_fsdp_parallelism: -1", "ici_fsdp_parallelism: 16")
               .replace("ici_tensor_parallelism: 1", "ici_tensor_parallelism: 4")
               .replace("max_target_length: 8192", "max_target_length: 2048")
               .replace("steps: 50000", "steps: 90000"))
    repo = _repo(tmp_path, foreign)
    with pytest.raises(AsapError) as info:
        apply_proposal("123", 1, None, LocalGitHost(repo), config_path="configs/model.yml")
    text = info.value.render()
    assert "does not match run 123's config (maxtext.yml)" in text
    assert "mesh fsdp=16 tensor=4 in configs/model.yml, fsdp=64 in run 123's config" in text
    assert "max_target_length 2048 in configs/model.yml, 8192 in run 123's config" in text
    assert "steps" not in text.split("hint:")[0]  # how long a run trains is not its shape
    assert "asap/" not in _branches(repo)


def test_cli_apply_into_a_foreign_config_exits_2_and_the_own_config_still_applies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path, CFG_311)
    with pytest.raises(SystemExit) as exited:
        main(["--runs-dir", str(RUNS), "apply", "123", "1", "--repo", str(repo), "--config", "configs/model.yml"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "not run 123's config" in err and "Traceback" not in err
    own = _repo(tmp_path / "own", CFG_123)
    res = apply_proposal("123", 1, None, LocalGitHost(own), config_path="configs/model.yml")
    assert res.status == "created"
