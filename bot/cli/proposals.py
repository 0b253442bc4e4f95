"""``asap propose``, ``asap review`` and ``asap eval``: checked sharding proposals on the command line.

Rich tables for people, ``--json`` for tools (schema: ``docs/proposals-json.md``). ``asap review`` exits 0
when nothing is flagged, 1 when a problem is (so CI can gate a PR), 2 on bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from bot.cli import cli

console = Console(highlight=False, soft_wrap=True)


def _store(ctx: click.Context):  # noqa: ANN202 - LocalRunStore
    from bot.runs.store import LocalRunStore

    return LocalRunStore((ctx.obj or {}).get("runs_dir"))


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f} ms"


def _gb(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e9:,.1f} GB"


@cli.command("propose")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON (docs/proposals-json.md).")
@click.option("-k", "k", default=3, show_default=True, type=click.IntRange(1, 10), help="How many proposals.")
@click.option("--diff/--no-diff", default=True, show_default=True, help="Show each proposal's config diff.")
@click.pass_context
def propose_cmd(ctx: click.Context, run_id: str, as_json: bool, k: int, diff: bool) -> None:
    """Three checked, distinct sharding proposals for RUN_ID, with predicted impact."""
    from bot.analysis.analyze import analyze_run
    from bot.proposals.engine import propose

    run = _store(ctx).get(run_id)
    result = propose(run, analyze_run(run), k=k)
    if as_json:
        click.echo(result.model_dump_json(indent=2))
        return
    b = result.baseline
    console.print(f"[bold]Run {result.run_id}[/] — {result.bottleneck}-bound — current mesh [cyan]{b.mesh_short}[/]")
    if b.measured_step_ms is not None:
        pred = f", model {b.predicted.step_time_ms:.1f} ms" if b.predicted else ""
        console.print(f"measured {b.measured_step_ms:.1f} ms/step{pred}")
    console.print(f"[bold]{result.summary}[/]")
    for p in result.proposals:
        console.print()
        labels = f" [yellow]({', '.join(p.labels)})[/]" if p.labels else ""
        what = "; ".join([p.mesh_short] + p.settings_changes)
        console.print(f"[bold]{p.rank}. {what}[/]  [dim]{p.kind}, from {p.origin}[/]{labels}")
        if p.predicted is not None:
            pr = p.predicted
            pct = f" ({p.change.step_time_percent:+.1f}%)" if p.change.step_time_percent is not None else ""
            if p.change.tokens_per_step_factor != 1.0 and p.change.time_per_token_percent is not None:
                pct = (f" for x{p.change.tokens_per_step_factor:g} tokens: {p.change.time_per_token_percent:+.1f}% "
                       "per token")
            mem = (f"memory/chip {_gb(pr.memory_per_chip_bytes)} of {_gb(pr.memory_capacity_bytes)}"
                   if pr.memory_per_chip_bytes is not None else "memory/chip not computed (model unknown)")
            basis = " [dim](relative to the profile)[/]" if pr.basis == "profile" else ""
            console.print(
                f"   step {_ms(pr.step_time_ms)}{pct} [{pr.step_time_low_ms:.1f}–{pr.step_time_high_ms:.1f}], {mem}{basis}"
            )
        console.print(f"   confidence {p.confidence:.2f}: {'; '.join(p.confidence_reasons[:3])}")
        console.print(f"   [dim]why:[/] {p.rationale}")
        for t in p.tradeoffs:
            console.print(f"   [dim]trade-off:[/] {t}")
        checks = "  ".join(
            f"[{'green' if c.passed else ('red' if c.hard else 'yellow')}]{c.name} "
            f"{'skipped' if c.skipped else ('ok' if c.passed else ('FAIL' if c.hard else 'warn'))}[/]"
            for c in p.critic
        )
        console.print(f"   critic: {checks}")
        for c in p.citations:
            console.print(f"   [dim]cites ({c.kind}):[/] {c.ref} [dim]— {c.why}[/]", markup=True)
        if diff and p.diff:
            console.print(p.diff.rstrip("\n"), markup=False)
    for a in result.advice:
        cited = f"; playbook {a.citation}" if a.citation else ""
        console.print(f"\n[bold]advice[/] ({a.id}): {a.text}  [dim]source: {a.source}{cited}[/]")
    for n in result.notes:
        console.print(f"[dim]note:[/] {n}")


@cli.command("review")
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--run", "run_id", default=None, help="Run whose model, chip and profile calibrate the review.")
@click.option("--chips", type=click.IntRange(min=1), default=None, help="Chip count when no --run is given.")
@click.option("--slices", type=click.IntRange(min=1), default=None, help="Slice/node count when no --run is given.")
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON (docs/proposals-json.md).")
@click.pass_context
def review_cmd(
    ctx: click.Context, old: Path, new: Path, run_id: str | None, chips: int | None, slices: int | None, as_json: bool
) -> None:
    """Predict the effect of a config change OLD -> NEW and flag problems (exit 1 when any)."""
    from bot.proposals.review import review

    run = _store(ctx).get(run_id) if run_id else None
    result = review(old, new, run, num_chips=chips, num_slices=slices)
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        console.print(f"[bold]{result.old.mesh_short}[/] -> [bold]{result.new.mesh_short or '(invalid)'}[/]"
                      + (f"  (run {result.run_id}, {result.bottleneck}-bound)" if result.run_id else ""))
        if result.old.predicted and result.new.predicted and result.change:
            o, n = result.old.predicted, result.new.predicted
            console.print(
                f"step {_ms(o.step_time_ms)} -> {_ms(n.step_time_ms)} ({result.change.step_time_percent:+.1f}%), "
                f"memory/chip {_gb(o.memory_per_chip_bytes)} -> {_gb(n.memory_per_chip_bytes)} of {_gb(n.memory_capacity_bytes)}"
            )
        colors = {"problem": "red", "warning": "yellow", "info": "dim"}
        for f in result.findings:
            console.print(f"[{colors[f.severity]}]{f.severity}[/] {f.check}: {f.message}")
        for s in result.skipped:
            console.print(f"[dim]skipped:[/] {s}")
        console.print("[green]OK: no problems flagged[/]" if result.ok else "[red]problems flagged[/]")
    if not result.ok:
        # SystemExit, not ctx.exit: bot.cli.main runs click with standalone_mode=False, which turns
        # ctx.exit(code) into a discarded return value instead of the process exit status.
        sys.exit(1)


@cli.command("eval")
@click.argument("cases_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the eval report as JSON.")
def eval_cmd(cases_dir: Path, as_json: bool) -> None:
    """Run the proposal engine over eval case folders and report match rates and errors."""
    from bot.proposals.evaluate import run_eval

    report = run_eval(cases_dir)
    if as_json:
        click.echo(report.model_dump_json(indent=2))
        return
    table = Table(title=f"asap eval {cases_dir}")
    for col in ("case", "kind", "top-1", "top-3", "kind/verdict", "failing", "step err", "s", "notes"):
        table.add_column(col, overflow="fold")

    def yn(v: bool | None) -> str:
        return "-" if v is None else ("yes" if v else "no")

    for c in report.cases:
        err = f"{max(c.step_time_errors):.0%}" if c.step_time_errors else "-"
        if c.error:
            extra = c.error
        elif c.kind == "config_only":
            extra = f"expert rank {c.expert_rank}" + ("" if c.expert_passes_critic else ", expert FAILS the Critic")
        else:
            extra = c.verdict or ""
        kv = c.verdict_match if c.verdict_match is not None else c.kind_top3
        table.add_row(
            c.case, c.kind, yn(c.top1), yn(c.top3), yn(kv), f"{c.proposals_failing_check}/{c.proposals_total}",
            err, f"{c.seconds:.2f}", extra,
        )
    console.print(table)

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.0%}"

    console.print(
        f"top-1 {pct(report.top1_rate)}  top-3 {pct(report.top3_rate)}  verdict {pct(report.verdict_match_rate)}  "
        f"kind top-3 {pct(report.kind_top3_rate)}  proposals failing a check "
        f"{pct(report.failing_check_rate)}  step-time error mean {pct(report.step_time_error_mean)} "
        f"max {pct(report.step_time_error_max)}  "
        f"time/case {report.seconds_per_case or 0:.2f} s"
    )
