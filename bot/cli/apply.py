"""``asap apply RUN N``: apply proposal N of a run as a branch + one commit (local git) or a GitHub PR.

    asap apply 123 2 --repo ~/src/llm [--config configs/llama3-8b.yml]
    asap apply 123 2 --github acme/llm --config configs/llama3-8b.yml   # GITHUB_TOKEN or App credentials

The commit edits only the lines the proposal changes: its mesh keys and its settings keys (micro-batch,
remat policy, ...). The local repository's working tree and checked-out branch are never touched: the branch
``asap/123-p2`` is written with git plumbing, and the diff it holds is printed. Exit status 0 when the change exists (opened,
updated or already up to date), 1 when it was not applied (another apply is open for the config, or a
person pushed to the bot's branch).
"""

from __future__ import annotations

import getpass
import sys

import click

from bot.cli import cli
from bot.textsafe import strip_controls


@cli.command("apply")
@click.argument("run_id")
@click.argument("index", type=click.IntRange(1, 20))
@click.option("--repo", "repo", default=".", show_default=True, type=click.Path(file_okay=False),
              help="Local git repository to write the branch in.")
@click.option("--config", "config_path", default=None,
              help="Config file inside the repository (default: linked in .asap.yml, else the run's config name).")
@click.option("--github", "github_repo", default=None, metavar="OWNER/REPO",
              help="Open a pull request on GitHub instead of a local branch.")
@click.pass_context
def apply_cmd(ctx: click.Context, run_id: str, index: int, repo: str, config_path: str | None,
              github_repo: str | None) -> None:
    """Apply proposal INDEX of RUN_ID: a bot-owned branch with one commit that edits only the lines it changes."""
    from bot.apply import apply_proposal
    from bot.runs.open import open_runs
    from bot.runtime.jobs import Requester

    runs = open_runs((ctx.obj or {}).get("runs"), runs_dir=(ctx.obj or {}).get("runs_dir"))
    requester = Requester(source="cli", user_id=getpass.getuser() or "local")
    if github_repo:
        from integrations.codehost.github import GitHubAuthSettings, GitHubClients

        host = GitHubClients(GitHubAuthSettings.from_env()).host(github_repo)
    else:
        from integrations.codehost.localgit import LocalGitHost

        host = LocalGitHost(repo)
    result = apply_proposal(run_id, index, requester, host, config_path=config_path, runs=runs)
    if result.diff:
        click.echo(strip_controls(result.diff.rstrip("\n")))
        click.echo("")
    click.echo(strip_controls(result.message))
    if result.status in ("locked", "human_push"):
        sys.exit(1)
