"""apply_proposal and ``asap apply`` on real git repositories in tmp_path (the embedded code host)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.apply import apply_proposal, branch_name
from bot.cli import main
from bot.errors import AsapError
from integrations.codehost.localgit import LocalGitHost

RUNS = Path(__file__).resolve().parents[1] / "examples" / "runs"
CFG = (RUNS / "123" / "maxtext.yml").read_text()
MESH_KEYS = {f"{net}_{axis}_parallelism" for net in ("ici", "dcn")
             for axis in ("data", "fsdp", "tensor", "sequence", "expert", "pipeline")}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "llm"
    subprocess.run(["git", "init", "-q", "-b", "main", str(r)], check=True)
    (r / "configs").mkdir()
    (r / "configs" / "llama3-8b.yml").write_text(CFG)
    (r / "README.md").write_text("hi\n")
    git(r, "add", ".")
    git(r, "-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qm", "init")
    return r


def test_apply_makes_one_bot_commit_on_a_branch_and_leaves_the_worktree_alone(repo: Path):
    (repo / "README.md").write_text("uncommitted work\n")  # the person's dirty tree must survive
    host = LocalGitHost(repo)
    res = apply_proposal("123", 1, None, host, config_path="configs/llama3-8b.yml")
    assert res.created and res.status == "created" and res.branch == "asap/123-p1"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (repo / "README.md").read_text() == "uncommitted work\n"
    assert (repo / "configs" / "llama3-8b.yml").read_text() == CFG
    assert git(repo, "rev-list", "--count", "main..asap/123-p1") == "1"
    bot = "asap-bot@users.noreply.github.com"
    assert git(repo, "log", "-1", "--format=%ae %ce", "asap/123-p1") == f"{bot} {bot}"
    assert git(repo, "diff", "--name-only", "main", "asap/123-p1") == "configs/llama3-8b.yml"
    after = git(repo, "show", "asap/123-p1:configs/llama3-8b.yml") + "\n"
    changed = [(a, b) for a, b in zip(CFG.split("\n"), after.split("\n"), strict=True) if a != b]
    assert changed and all(a.split(":")[0] == b.split(":")[0] in MESH_KEYS for a, b in changed)
    assert res.diff.startswith("--- a/configs/llama3-8b.yml")


def test_applying_again_is_idempotent_and_follows_a_moved_base(repo: Path):
    host = LocalGitHost(repo)
    first = apply_proposal("123", 1, None, host, config_path="configs/llama3-8b.yml")
    again = apply_proposal("123", 1, None, host, config_path="configs/llama3-8b.yml")
    assert again.status == "unchanged" and again.commit_sha == first.commit_sha and not again.created
    assert again.pull_number == first.pull_number and len(host.open_pulls()) == 1
    (repo / "README.md").write_text("moved on\n")
    git(repo, "-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qam", "more")
    moved = apply_proposal("123", 1, None, host, config_path="configs/llama3-8b.yml")
    assert moved.status == "updated" and moved.commit_sha != first.commit_sha
    assert git(repo, "rev-list", "--count", "main..asap/123-p1") == "1"  # still one commit, on the new main


def test_one_open_apply_per_config_then_free_after_merge(repo: Path):
    host = LocalGitHost(repo)
    apply_proposal("123", 1, None, host, config_path="configs/llama3-8b.yml")
    locked = apply_proposal("123", 2, None, host, config_path="configs/llama3-8b.yml")
    assert locked.status == "locked" and locked.branch == "asap/123-p1" and "already open" in locked.message
    assert "asap/123-p2" not in git(repo, "branch", "--list")
    git(repo, "merge", "-q", "--ff-only", "asap/123-p1")
    res = apply_proposal("123", 2, None, host, config_path="configs/llama3-8b.yml")
    assert res.status == "created" and res.branch == "asap/123-p2"  # the lock is gone once p1 is merged


def test_human_commit_on_the_bot_branch_stops_rewriting(repo: Path):
    host = LocalGitHost(repo)
    apply_proposal("123", 1, None, host, config_path="configs/llama3-8b.yml")
    git(repo, "checkout", "-q", "asap/123-p1")
    (repo / "README.md").write_text("by hand\n")
    git(repo, "-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qam", "tweak")
    human = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    res = apply_proposal("123", 1, None, host, config_path="configs/llama3-8b.yml")
    assert res.status == "human_push" and "no longer rewrites" in res.message and "dev@acme.dev" in res.message
    assert git(repo, "rev-parse", "asap/123-p1") == human


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", ".git/config", "configs/../../x.yml",
                                 "https://evil.example/x.yml"])
def test_paths_outside_the_repository_are_refused(repo: Path, bad: str):
    with pytest.raises(AsapError) as exc:
        apply_proposal("123", 1, None, LocalGitHost(repo), config_path=bad)
    assert exc.value.field == "config_path"
    assert git(repo, "branch", "--list", "asap/*") == ""


def test_config_found_through_asap_yml_link(repo: Path):
    (repo / ".asap.yml").write_text('runs:\n  configs/llama3-8b.yml: "123"\n')
    git(repo, "add", ".asap.yml")
    git(repo, "-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qm", "link")
    res = apply_proposal("123", 1, None, LocalGitHost(repo))
    assert res.config_path == "configs/llama3-8b.yml"


def test_unknown_config_says_how_to_name_it(repo: Path):
    with pytest.raises(AsapError) as exc:
        apply_proposal("123", 1, None, LocalGitHost(repo))
    assert "--config" in (exc.value.hint or "")


def test_not_a_git_repository(tmp_path: Path):
    with pytest.raises(AsapError, match="not a git repository"):
        LocalGitHost(tmp_path)


def test_branch_names_are_safe():
    from integrations.codehost.base import safe_branch

    for run in ("job 12/../x", "../../etc", "a..b", "run 123", "-x-"):
        name = branch_name(run, 2)
        assert safe_branch(name) == name and ".." not in name and name.endswith("-p2")
    assert branch_name("run 123", 1) == "asap/run-123-p1"


def test_cli_apply_prints_the_diff_and_exits_1_when_locked(repo: Path, capsys):
    import bot.cli.apply  # noqa: F401  (registers the command until bot/cli/__init__.py does)

    main(["apply", "123", "1", "--repo", str(repo), "--config", "configs/llama3-8b.yml"])
    out = capsys.readouterr().out
    assert "+ici_" in out and "-ici_" in out and "asap/123-p1" in out
    with pytest.raises(SystemExit) as exc:
        main(["apply", "123", "2", "--repo", str(repo), "--config", "configs/llama3-8b.yml"])
    assert exc.value.code == 1
    assert "already open" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["apply", "123", "1", "--repo", str(repo), "--config", "../x.yml"])
    assert exc.value.code == 2
