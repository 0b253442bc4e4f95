"""``asap propose``, ``asap review`` and ``asap eval``: checked sharding proposals on the command line.

Rich tables for people, ``--json`` for tools (schema: ``docs/proposals-json.md``). ``asap review`` exits 0
when nothing is flagged, 1 when a problem is (so CI can gate a PR), 2 on bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
import yaml
from rich import box
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from bot import fmt
from bot.cli import cli, err_console
from bot.cli.analyze import print_damage
from bot.cli.term import SafeConsole

console = SafeConsole(highlight=False)  # wraps to the terminal (80 columns when piped); diffs keep their lines


def _store(ctx: click.Context):  # noqa: ANN202 - LocalRunStore
    from bot.runs.open import open_runs

    return open_runs((ctx.obj or {}).get("runs"), runs_dir=(ctx.obj or {}).get("runs_dir"))


def _say(markup: str) -> None:
    """One proposal detail, indented 3 columns; wrapped lines keep the indent."""
    console.print(Padding(Text.from_markup(markup), (0, 0, 0, 3), expand=False))


_ms = fmt.ms
_gb = fmt.gb


@cli.command("propose")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON (docs/proposals-json.md).")
@click.option("-k", "k", default=3, show_default=True, type=click.IntRange(1, 10), help="How many proposals.")
@click.option("--diff/--no-diff", default=True, show_default=True, help="Show each proposal's config diff.")
@click.option("--aot", is_flag=True, help="Also compile each mesh's sharded train step at reduced scale (jax extra).")
@click.option("--aot-timeout", type=click.FloatRange(min=1), default=120.0, show_default=True,
              help="Seconds allowed per AOT compile.")
@click.pass_context
def propose_cmd(
    ctx: click.Context, run_id: str, as_json: bool, k: int, diff: bool, aot: bool, aot_timeout: float
) -> None:
    """Three checked, distinct sharding proposals for RUN_ID, with predicted impact."""
    from bot.analysis.analyze import analyze_run
    from bot.proposals.engine import propose

    run = _store(ctx).get(run_id)
    report = analyze_run(run)
    result = propose(run, report, k=k)
    reports: list[Any] = []
    if aot:
        reports = _aot_for_proposals(run, result, aot_timeout)
    if as_json:
        if not aot:
            click.echo(result.model_dump_json(indent=2))
            return
        data = result.model_dump(mode="json")
        data["baseline"]["aot"] = reports[0].model_dump(mode="json")
        for p, rep in zip(data["proposals"], reports[1:], strict=True):
            p["aot"] = rep.model_dump(mode="json")
        click.echo(json.dumps(data, indent=2))
        return
    print_damage(report, console)
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
        _say(f"confidence {p.confidence:.2f}: {escape('; '.join(p.confidence_reasons[:3]))}")
        _say(f"[dim]why:[/] {escape(p.rationale)}")
        for t in p.tradeoffs:
            _say(f"[dim]trade-off:[/] {escape(t)}")
        checks = "  ".join(
            f"[{'green' if c.passed else ('red' if c.hard else 'yellow')}]{c.name} "
            f"{'skipped' if c.skipped else ('ok' if c.passed else ('FAIL' if c.hard else 'warn'))}[/]"
            for c in p.critic
        )
        _say(f"critic: {checks}")
        for c in p.citations:
            _say(f"[dim]cites ({c.kind}):[/] {escape(c.ref)} [dim]— {escape(c.why)}[/]")
        if diff and p.diff:
            console.print(p.diff.rstrip("\n"), markup=False, soft_wrap=True)
    for a in result.advice:
        cited = f"; playbook {a.citation}" if a.citation else ""
        console.print(f"\n[bold]advice[/] ({escape(a.id)}): {escape(a.text)}  [dim]source: {escape(a.source + cited)}[/]")
    for n in result.notes:
        console.print(f"[dim]note:[/] {escape(n)}")
    if aot:
        _print_aot(["baseline"] + [str(p.rank) for p in result.proposals], reports)


def _proposal_settings(base: Any | None, changes: dict[str, object]) -> Any | None:
    """The base training settings with a proposal's remat change applied (the only setting AOT models)."""
    remat = next((v for key, v in changes.items() if "remat" in key or "recompute" in key), None)
    if remat is None:
        return base
    if base is not None and hasattr(base, "model_copy"):
        return base.model_copy(update={"remat_policy": str(remat)})
    from types import SimpleNamespace

    return SimpleNamespace(remat_policy=str(remat))


def _aot_for_proposals(run: Any, result: Any, timeout_s: float) -> list[Any]:
    """AOT reports for the baseline and each proposal (two compiles at a time); adds ``aot_compile`` checks."""
    from concurrent.futures import ThreadPoolExecutor

    from bot.configs.mesh import Mesh
    from bot.proposals.aot import aot_check
    from bot.proposals.critic import check_aot
    from knowledge.cost_settings import settings_for_run

    base = settings_for_run(run)
    jobs = [(Mesh(**result.baseline.mesh), base)] + [
        (Mesh(**p.mesh), _proposal_settings(base, p.settings)) for p in result.proposals
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = list(pool.map(lambda j: aot_check(run, j[0], settings=j[1], timeout_s=timeout_s), jobs))
    result.baseline.critic.append(check_aot(reports[0]))
    for p, rep in zip(result.proposals, reports[1:], strict=True):
        p.critic.append(check_aot(rep))
    return reports


def _print_aot(labels: list[str], reports: list[Any]) -> None:
    """The AOT table: per mesh, compiled or not, collective counts, MB per step, temp memory."""
    from bot.proposals.aot import CAVEAT

    table = Table(title="AOT compile at reduced scale (XLA:CPU virtual devices)")
    for col in ("", "mesh", "ok", "AG", "RS", "AR", "A2A", "perm", "MB/step", "temp MB", "s"):
        table.add_column(col, no_wrap=col in ("", "mesh"), overflow="fold")
    for label, r in zip(labels, reports, strict=True):
        c = r.collective_counts
        ok = "yes" if r.compiled else ("NO" if r.status == "compile_error" else r.status)
        temp = r.memory.temp_bytes if r.memory and r.memory.temp_bytes is not None else None
        table.add_row(
            label, r.mesh_short, ok,
            *(str(c[op]) if op in c else "-" for op in ("all-gather", "reduce-scatter", "all-reduce", "all-to-all",
                                                         "collective-permute")),
            "-" if r.collective_bytes_per_step is None else f"{r.collective_bytes_per_step / 1e6:.2f}",
            "-" if temp is None else f"{temp / 1e6:.1f}",
            "-" if r.compile_s is None else f"{r.compile_s:.1f}",
        )
    console.print(table)
    console.print("[dim]AG all-gather, RS reduce-scatter, AR all-reduce, A2A all-to-all, perm collective-permute; "
                  "MB/step: collective bytes per device per step; temp MB: XLA temp buffers per device; s: compile time[/]")
    for label, r in zip(labels, reports, strict=True):
        if r.scale_note:
            console.print(f"[dim]{label}: {r.scale_note}[/]")
        if not r.compiled:
            console.print(f"[{'red' if r.status == 'compile_error' else 'dim'}]{label}: {r.message}[/]")
    console.print(f"[dim]{CAVEAT}[/]")


@cli.command("record-outcome")
@click.argument("run_id")
@click.pass_context
def record_outcome_cmd(ctx: click.Context, run_id: str) -> None:
    """Record RUN_ID's measured outcome against the ASAP proposal it applied (its run.yaml derived_from).

    The one command that writes the history of applied proposals ($ASAP_STATE_DIR/history.jsonl):
    `asap why` / `propose` only read. Idempotent; exits 1 when nothing could be recorded.
    """
    from bot.analysis.analyze import analyze_run
    from bot.errors import AsapError
    from bot.proposals.outcomes import record_run_outcome
    from knowledge.history import HistoryStore
    from knowledge.history_sources.applied import applied_id

    runs = _store(ctx)
    run = runs.get(run_id)
    d = run.record.derived_from
    if d is None:
        raise AsapError(
            f"run {run_id} has no derived_from, so it applied no ASAP proposal and has no outcome to record",
            source=str(run.folder / "run.yaml"), field="derived_from",
            hint="add derived_from: {run: <run id>, proposal: <rank>} when the run used a proposal",
        )
    store = HistoryStore()
    warnings = record_run_outcome(run, analyze_run(run), store=store, runs=runs)
    rec = store.get(applied_id(run.record.id))
    for w in warnings:
        console.print(f"[yellow]warning:[/] {w}", markup=True)
    if rec is None or rec.outcome == "pending":
        ctx.exit(1)
        return
    console.print(
        f"recorded: run {run_id} applied proposal {d.proposal} of run {d.run}: outcome {rec.outcome}. {rec.summary}".strip(),
        markup=False,
    )


@cli.command("review")
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--run", "run_id", default=None, help="Run whose model, chip and profile calibrate the review.")
@click.option("--chips", type=click.IntRange(min=1), default=None, help="Chip count when no --run is given.")
@click.option("--slices", type=click.IntRange(min=1), default=None, help="Slice/node count when no --run is given.")
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON (docs/proposals-json.md).")
@click.option("--aot", is_flag=True, help="Also compile the new mesh's sharded train step at reduced scale (jax extra).")
@click.option("--aot-timeout", type=click.FloatRange(min=1), default=120.0, show_default=True,
              help="Seconds allowed for the AOT compile.")
@click.pass_context
def review_cmd(
    ctx: click.Context,
    old: Path,
    new: Path,
    run_id: str | None,
    chips: int | None,
    slices: int | None,
    as_json: bool,
    aot: bool,
    aot_timeout: float,
) -> None:
    """Predict the effect of a config change OLD -> NEW and flag problems (exit 1 when any)."""
    from bot.proposals.review import review

    run = _store(ctx).get(run_id) if run_id else None
    result = review(old, new, run, num_chips=chips, num_slices=slices)
    report = _aot_for_review(run, new, result, aot_timeout) if aot else None
    if as_json:
        if report is None:
            click.echo(result.model_dump_json(indent=2))
        else:
            data = result.model_dump(mode="json")
            data["new"]["aot"] = report.model_dump(mode="json") if report is not False else None
            click.echo(json.dumps(data, indent=2))
    else:
        console.print(f"[bold]{result.old.mesh_short}[/] -> [bold]{result.new.mesh_short or '(invalid)'}[/]"
                      + (f"  (run {result.run_id}, " + (f"{result.bottleneck}-bound" if result.bottleneck
                                                             else "no diagnosis") + ")" if result.run_id else ""))
        if result.old.predicted and result.new.predicted and result.change:
            o, n = result.old.predicted, result.new.predicted
            console.print(
                f"step {_ms(o.step_time_ms)} -> {_ms(n.step_time_ms)} ({result.change.step_time_percent:+.1f}%), "
                f"memory/chip {_gb(o.memory_per_chip_bytes)} -> {_gb(n.memory_per_chip_bytes)} of {_gb(n.memory_capacity_bytes)}"
            )
        colors = {"problem": "red", "pre-existing": "magenta", "warning": "yellow", "info": "dim"}
        for f in result.findings:
            console.print(f"[{colors[f.severity]}]{f.severity}[/] {f.check}: {f.message}")
        for s in result.skipped:
            console.print(f"[dim]skipped:[/] {s}")
        if report:
            _print_aot(["new"], [report])
        pre = sum(1 for f in result.findings if f.severity == "pre-existing")
        extra = f" ({pre} pre-existing problem(s) the change did not introduce)" if pre else ""
        console.print(f"[green]OK: no problems introduced by this change{extra}[/]" if result.ok
                      else f"[red]problems flagged{extra}[/]")
    if not result.ok:
        # SystemExit, not ctx.exit: bot.cli.main runs click with standalone_mode=False, which turns
        # ctx.exit(code) into a discarded return value instead of the process exit status.
        sys.exit(1)


def _aot_for_review(run: Any, new_path: Path, result: Any, timeout_s: float) -> Any:
    """AOT report for the review's new mesh (False when it did not resolve); a compile error is a problem.

    Adds the ``aot_compile`` check to ``result.critic`` and, when XLA rejects the mesh, a ``problem``
    finding (exit status 1). Without ``--run`` the chip count is the new mesh's own.
    """
    from bot.configs.mesh import Mesh
    from bot.proposals.aot import aot_check
    from bot.proposals.critic import check_aot
    from bot.proposals.models import ReviewFinding
    from bot.runs.record import RunRecord

    if result.new.mesh is None:
        result.skipped.append("aot_compile: the new mesh does not resolve, nothing to compile")
        return False
    mesh = Mesh(**result.new.mesh)
    target: Any = run
    settings = None
    if run is None:
        target = RunRecord(id="review", chip="unknown", num_chips=mesh.num_devices, num_slices=mesh.num_slices)
    try:
        from bot.configs.detect import load_config
        from knowledge.cost_settings import settings_from_config

        settings = settings_from_config(load_config(Path(new_path)))
    except Exception:  # noqa: BLE001 - settings only choose the remat mode; the review already read the file
        settings = None
    report = aot_check(target, mesh, settings=settings, timeout_s=timeout_s)
    check = check_aot(report)
    result.critic.append(check)
    if not check.passed:
        result.findings.append(ReviewFinding(severity="problem", check=check.name, message=check.reason))
        result.ok = False
    elif check.skipped:
        result.skipped.append(f"aot_compile: {report.message}")
    return report


@cli.command("eval")
@click.argument("cases_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the eval report as JSON.")
@click.option(
    "--floor", "floor_path", type=click.Path(path_type=Path), default=None,
    help="Compare the published-case figures with this floor file (e.g. examples/eval/floor.yaml); exit 1 on a regression.",
)
@click.option(
    "--write-floor", "write_floor", type=click.Path(path_type=Path), default=None,
    help="Write the figures measured now as the new floor file.",
)
def eval_cmd(cases_dir: Path, as_json: bool, floor_path: Path | None, write_floor: Path | None) -> None:
    """Run the proposal engine over eval case folders and report match rates and errors.

    Published cases (every folder not named sample-*) give the headline figures: adopted-config top-1/top-3,
    OOM recall and false-OOM rate, Critic false rejections, step-time error after one calibration per
    hardware family, memory error, and the Spearman of predicted vs measured throughput within each table.
    """
    from bot.proposals.eval_floor import floor_from, load_floor, regressions
    from bot.proposals.evaluate import run_eval

    report = run_eval(cases_dir)
    floor = load_floor(floor_path) if floor_path is not None else None
    if write_floor is not None:
        write_floor.write_text(
            yaml.safe_dump(floor_from(report, measured_on="asap eval --write-floor").model_dump(), sort_keys=False),
            encoding="utf-8",
        )
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        _print_eval(cases_dir, report)
    if floor is not None:
        missed = regressions(report, floor)
        for line in missed:
            err_console.print(f"[red]regression[/red]: {escape(line)}")
        if missed:
            raise SystemExit(1)
        if not as_json:
            console.print(f"floor {escape(str(floor_path))}: no figure regressed")


EVAL_TABLE_WIDTH = 110
"""Below this many columns ``asap eval`` lists cases one per block instead of as a table."""


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _yn(v: bool | None) -> str:
    return "-" if v is None else ("yes" if v else "no")


def _eval_row(c: Any) -> dict[str, str]:
    """One case's cells, as text."""
    if c.error:
        extra = c.error
    elif c.kind == "config_only":
        extra = f"expert rank {c.expert_rank}" + ("" if c.expert_passes_critic else ", expert FAILS the Critic")
    else:
        extra = c.verdict or ""
    kv = c.verdict_match if c.verdict_match is not None else c.kind_top3
    return {"case": c.case, "kind": c.kind, "top-1": _yn(c.top1), "top-3": _yn(c.top3), "verdict": _yn(kv),
            "failing": f"{c.proposals_failing_check}/{c.proposals_total}",
            "step err": f"{max(c.step_time_errors):.0%}" if c.step_time_errors else "-",
            "s": f"{c.seconds:.2f}", "notes": extra}


def _compact_table(title: str) -> Table:
    """A table without vertical rules (fits 80 columns more often); numbers get ``no_wrap`` columns."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)


def _table_cells(t) -> tuple[str, str, str, str, str, str]:  # type: ignore[no-untyped-def]
    """One published table's figures as text: name, rows, metric, Spearman (``*``: source-flagged rows left
    out), calibrated step error, memory pred/meas range."""
    mem = "-" if t.memory_ratio_min is None else f"{t.memory_ratio_min:.2f}-{t.memory_ratio_max:.2f}"
    rho = "-" if t.spearman is None else f"{t.spearman:+.2f}" + ("*" if t.flagged_rows else "")
    return escape(t.table), str(t.rows), escape(t.metric or "-"), rho, _pct(t.step_time_error_median), mem


def _print_tables(figs) -> None:  # type: ignore[no-untyped-def]
    """One row per published table at >= EVAL_TABLE_WIDTH columns, else one line per table (a piped 80-column
    console folded the table names to one character), then the Spearman with source-flagged rows counted."""
    cells = [_table_cells(t) for t in figs.tables]
    if console.width < EVAL_TABLE_WIDTH:
        console.print("published tables: rows, metric, Spearman, step error after calibration, memory pred/meas")
        for name, rows, metric, rho, err, mem in cells:
            console.print(f"  {name}: {rows}, {metric}, {rho}, {err}, {mem}")
    else:
        tables = _compact_table("published tables")
        tables.add_column("table", overflow="fold", ratio=1)
        for col in ("rows", "metric", "Spearman", "step err (cal.)", "memory pred/meas"):
            tables.add_column(col, no_wrap=col != "metric", justify="left" if col == "metric" else "right")
        for row in cells:
            tables.add_row(*row)
        console.print(tables)
    for t in figs.tables:
        if t.flagged_rows and t.spearman_all_rows is not None:
            console.print(f"* {escape(t.table)}: Spearman {t.spearman_all_rows:+.2f} with its {t.flagged_rows} "
                          "source-flagged row(s) counted (the source calls the figure a quirk)")


def _print_cases(rows: list[dict[str, str]], cases_dir: Path) -> None:
    """One row per case at >= EVAL_TABLE_WIDTH columns, else one short block per case."""
    if console.width < EVAL_TABLE_WIDTH:  # a 9-column table folded into 80 columns is unreadable
        console.print(f"[bold]asap eval {escape(str(cases_dir))}[/]")
        for r in rows:
            console.print(f"[bold]{escape(r['case'])}[/] ({r['kind']}): top-1 {r['top-1']}, top-3 {r['top-3']}, "
                          f"verdict {r['verdict']}, failing checks {r['failing']}, step error {r['step err']}, "
                          f"{r['s']} s" + (f"\n  {escape(r['notes'])}" if r["notes"] else ""))
        return
    table = _compact_table(f"asap eval {escape(str(cases_dir))}")
    table.add_column("case", overflow="fold", ratio=2)
    for col in ("kind", "top-1", "top-3", "verdict", "failing", "step err", "s"):
        table.add_column(col, no_wrap=True, justify="left" if col == "kind" else "right")
    table.add_column("notes", ratio=1)
    for r in rows:
        table.add_row(*(escape(r[k]) for k in ("case", "kind", "top-1", "top-3", "verdict", "failing", "step err",
                                                  "s", "notes")))
    console.print(table)


def _print_eval(cases_dir: Path, report) -> None:  # type: ignore[no-untyped-def]
    """The eval report: the cases, then the published figures and one row per table."""
    _print_cases([_eval_row(c) for c in report.cases], cases_dir)
    pct = _pct
    console.print(
        f"(published cases) top-1 {pct(report.top1_rate)}  top-3 {pct(report.top3_rate)}  verdict {pct(report.verdict_match_rate)}  "
        f"kind top-3 {pct(report.kind_top3_rate)}  proposals failing a check "
        f"{pct(report.failing_check_rate)}  step-time error mean {pct(report.step_time_error_mean)} "
        f"max {pct(report.step_time_error_max)}  "
        f"time/case {report.seconds_per_case or 0:.2f} s"
    )
    figs = report.published
    if figs is not None:
        cal = ", ".join(f"{k} x{v:.2f}" for k, v in figs.calibration.items()) or "none"
        console.print(
            f"published: {figs.cases} cases; adopted config top-1 {pct(figs.top1_rate)} top-3 {pct(figs.top3_rate)} "
            f"(of {figs.adopted_cases}); OOM recall {pct(figs.oom_recall)} (of {figs.oom_cases}); false OOM "
            f"{pct(figs.false_oom_rate)} (of {figs.ran_cases}); Critic false rejections {figs.critic_false_rejections} "
            f"({pct(figs.critic_false_rejection_rate)}); step-time |error| median {pct(figs.step_time_error_median_uncalibrated)} "
            f"raw, {pct(figs.step_time_error_median)} after calibration ({cal}); memory |error| median "
            f"{pct(figs.memory_error_median)} over {figs.memory_points}"
        )
        _print_tables(figs)
    if report.samples is not None:
        console.print(
            f"sample-* cases (ASAP's own physics model, not counted): {report.samples.cases}, "
            f"top-1 {pct(report.samples.top1_rate)} top-3 {pct(report.samples.top3_rate)}"
        )
