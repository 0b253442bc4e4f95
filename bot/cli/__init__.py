"""The ``asap`` command line.

Each command group lives in its own module and registers itself on :data:`cli`; :func:`main` turns every
:class:`~bot.errors.AsapError` into one clear message on stderr and exit status 2 (never a traceback).
"""

from __future__ import annotations

import sys

import click
from rich.markup import escape

from bot.cli.term import SafeConsole
from bot.errors import AsapError

err_console = SafeConsole(stderr=True, highlight=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--runs-dir",
    envvar="ASAP_RUNS_DIR",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    help="Folder of runs (<runs dir>/<run id>/run.yaml). Default: the bundled examples/runs.",
)
@click.option(
    "--runs",
    envvar="ASAP_RUNS",
    default=None,
    help="Run stores searched in order, comma-separated: DIR, gs://bucket/prefix, s3://bucket/prefix, "
    "mlflow+http://host:port[/experiment], tb:LOGDIR (docs/run-stores.md). Overrides --runs-dir.",
)
@click.pass_context
def cli(ctx: click.Context, runs_dir: str | None, runs: str | None) -> None:
    """ASAP: why is this training run slow, and what sharding should it use instead?"""
    ctx.ensure_object(dict)
    ctx.obj["runs_dir"] = runs_dir
    ctx.obj["runs"] = runs  # store URLs; commands pass them on (serve/worker export them for their workers)


def _register() -> None:
    from bot.cli import (
        agents,  # noqa: F401  (registers chat/ask/log)
        analyze,  # noqa: F401  (registers why/runs/show)
        apply,  # noqa: F401  (registers apply)
        knowledge,  # noqa: F401  (registers index)
        proposals,  # noqa: F401  (registers propose/review/eval)
        runtime,  # noqa: F401  (registers serve/worker)
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, printing user errors without a traceback."""
    _register()
    try:
        rc = cli.main(args=argv, prog_name="asap", standalone_mode=False)
    except AsapError as exc:
        err_console.print(f"[bold red]error:[/] {escape(exc.render())}", markup=True, soft_wrap=True)
        sys.exit(2)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    # With standalone_mode=False, click returns ctx.exit(code) as a value instead of exiting.
    if isinstance(rc, int) and rc:
        sys.exit(rc)
