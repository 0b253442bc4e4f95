"""``asap runs``, ``asap show RUN`` and ``asap why RUN``: the analyst commands.

Readable rich output by default; ``--json`` prints machine-readable JSON only (for ``why`` the stable
:class:`~bot.analysis.report.AnalysisReport` schema documented in ``docs/json-output.md``). Errors are
:class:`~bot.errors.AsapError`, which :func:`bot.cli.main` prints as one line with exit status 2.
"""

from __future__ import annotations

import json

import click
import yaml
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bot import fmt
from bot.analysis.analyze import DEFAULT_TOP_N, analyze_run, load_mesh
from bot.analysis.diagnosis import LABEL
from bot.analysis.preflight import LABEL as PREDICTED
from bot.analysis.report import AnalysisReport, Kpis, PredictedStep
from bot.cli import cli
from bot.cli.term import SafeConsole
from bot.errors import AsapError
from bot.runs.open import ChainStore, open_runs
from bot.runs.store import RUN_FILE, Run

_MAX_LISTED_FILES = 200


def _store(ctx: click.Context) -> ChainStore:
    obj = ctx.find_root().obj or {}
    return open_runs(obj.get("runs"), runs_dir=obj.get("runs_dir"))


def _console() -> Console:
    return SafeConsole(highlight=False, soft_wrap=False)


def _params(value: float | None) -> str:
    if value is None:
        return "?"
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if value >= scale:
            return f"{value / scale:.1f}{suffix}"
    return f"{value:.0f}"


def _model_label(run: Run) -> str:
    model = run.record.model
    if model is None:
        return "unknown"
    params = model.derived_params()
    parts = [p for p in (model.name, _params(params) if params else None) if p]
    return " ".join(parts) if parts else "unknown"


# --------------------------------------------------------------------------------------------- runs
@cli.command("runs")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True, help="Runs per page.")
@click.option("--page-token", default=None, help="Go on from where the previous page ended (printed below it).")
@click.pass_context
def runs_cmd(ctx: click.Context, as_json: bool, limit: int, page_token: str | None) -> None:
    """List the runs in the configured stores, a page at a time: ID, name, chips, mesh, model."""
    store = _store(ctx)
    rows: list[dict[str, str | int | None]] = []
    page, next_token = store.list_page(limit, page_token)
    for entry in page:
        run_id = str(entry["id"])
        if not entry.get("local"):  # remote stores: list without downloading every run's files
            rows.append({"id": run_id, "name": entry.get("name"), "chip": entry.get("chip"),
                         "num_chips": entry.get("num_chips"), "num_slices": None, "mesh": None,
                         "model": "", "error": None, "where": entry.get("where")})
            continue
        try:
            run = store.get(run_id)
        except AsapError as exc:  # a broken run.yaml is shown, never silently skipped
            rows.append({"id": run_id, "error": exc.render()})
            continue
        mesh, _, problems = load_mesh(run)
        rec = run.record
        rows.append(
            {
                "id": rec.id,
                "name": rec.name,
                "chip": rec.chip,
                "num_chips": rec.num_chips,
                "num_slices": rec.num_slices,
                "mesh": mesh.short() if mesh is not None else None,
                "model": _model_label(run),
                "error": problems[0] if problems else None,
            }
        )
    where = ", ".join(store.describe())
    if as_json:
        click.echo(json.dumps({"runs_dir": where, "stores": store.describe(), "runs": rows,
                               "next_page_token": next_token, "warnings": store.warnings}, indent=2))
        return
    console = _console()
    for warning in store.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    if not rows:
        console.print(f"No runs in {escape(where)} (each run is <run id>/{RUN_FILE}).")
        return
    table = Table(title=f"Runs in {escape(where)}", title_justify="left")
    for col in ("ID", "Name", "Chips", "Mesh", "Model"):
        table.add_column(col, overflow="fold")
    for row in rows:
        if "chip" not in row:
            table.add_row(escape(str(row["id"])), f"[red]unreadable: {escape(str(row['error']))}[/]", "", "", "")
            continue
        chips = f"{row['chip']} x {row['num_chips']}" if row["chip"] else "-"
        if row["num_slices"] and int(row["num_slices"]) > 1:
            chips += f" ({row['num_slices']} slices)"
        mesh = escape(str(row["mesh"])) if row["mesh"] else ("[red]config error[/]" if row["error"] else "-")
        table.add_row(escape(str(row["id"])), escape(str(row["name"] or "")), escape(chips), mesh, escape(str(row["model"])))
    console.print(table)
    if next_token:
        console.print(f"more: asap runs --limit {limit} --page-token {next_token}")


# --------------------------------------------------------------------------------------------- show
def _run_files(run: Run) -> list[dict[str, object]]:
    """Profile entries named in run.yaml (with whether they exist), else the files in the run folder."""
    rec = run.record
    out: list[dict[str, object]] = []
    if rec.profile:
        for i, rel in enumerate(rec.profile):
            path = run.path(rel, field=f"profile[{i}]")
            entry: dict[str, object] = {"path": rel, "exists": path.exists()}
            if path.is_file():
                entry["bytes"] = path.stat().st_size
            elif path.is_dir():
                entry["files"] = sum(1 for p in path.rglob("*") if p.is_file())
            out.append(entry)
        return out
    skip = {RUN_FILE, rec.config or ""}
    root = run.folder.resolve()
    for path in sorted(run.folder.rglob("*")):
        if len(out) >= _MAX_LISTED_FILES:
            out.append({"path": "...", "exists": True, "note": f"more than {_MAX_LISTED_FILES} files"})
            break
        if not path.is_file() or path.is_symlink():
            continue
        rel = path.resolve().relative_to(root).as_posix() if root in path.resolve().parents else None
        if rel is None or rel in skip:
            continue
        out.append({"path": rel, "exists": True, "bytes": path.stat().st_size})
    return out


@cli.command("show")
@click.argument("run_id", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Print the run record, config and files as JSON.")
@click.pass_context
def show_cmd(ctx: click.Context, run_id: str, as_json: bool) -> None:
    """Show a run: its record (run.yaml), sharding config and the profile files found."""
    run = _store(ctx).get(run_id)
    rec = run.record
    record = rec.model_dump(mode="json", exclude_none=True)
    config: dict[str, object] | None = None
    if rec.config:
        mesh, fmt, problems = load_mesh(run)
        config = {
            "path": rec.config,
            "exists": run.path(rec.config, field="config").is_file(),
            "format": fmt,
            "mesh": {"ici": dict(mesh.ici), "dcn": dict(mesh.dcn)} if mesh is not None else None,
            "mesh_short": mesh.short() if mesh is not None else None,
            "error": problems[0] if problems else None,
        }
    files = _run_files(run)
    if as_json:
        click.echo(json.dumps({"folder": str(run.folder), "found_in": run.where, "record": record, "config": config, "profile_files": files}, indent=2))
        return
    console = _console()
    console.print(f"[bold]Run {escape(rec.id)}[/]" + (f" — {escape(rec.name)}" if rec.name else ""))
    console.print(f"found in: {escape(run.where)}")
    if run.origin:
        console.print(f"cached at: {escape(str(run.folder))}")
    else:
        console.print(f"folder: {escape(str(run.folder))}")
    console.print()
    console.print(f"[bold]{RUN_FILE}[/]")
    console.print(escape(yaml.safe_dump(record, sort_keys=False, width=100, allow_unicode=True).rstrip()), soft_wrap=True)
    console.print()
    console.print("[bold]sharding config[/]")
    if config is None:
        console.print("  none (run.yaml has no `config:`)")
    else:
        console.print(f"  file: {escape(str(config['path']))}" + ("" if config["exists"] else " [red](missing)[/]"))
        if config["error"]:
            console.print(f"  [red]{escape(str(config['error']))}[/]")
        else:
            console.print(f"  format: {escape(str(config['format']))}")
            console.print(f"  mesh: {escape(str(config['mesh_short']))}")
    console.print()
    origin = "named in run.yaml" if rec.profile else "found in the run folder"
    console.print(f"[bold]profile files[/] ({origin})")
    if not files:
        console.print("  none")
    for f in files:
        size = f" ({_bytes(f['bytes'])})" if "bytes" in f else (f" ({f['files']} files)" if "files" in f else "")
        missing = "" if f["exists"] else " [red](missing)[/]"
        console.print(f"  {escape(str(f['path']))}{size}{missing}")


def _bytes(n: object) -> str:
    value = float(n)  # type: ignore[arg-type]
    for scale, suffix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if value >= scale:
            return f"{value / scale:.1f} {suffix}"
    return f"{value:.0f} B"


# ---------------------------------------------------------------------------------------------- why
def _num(v: float | None, fmt: str = "{:.1f}", unit: str = "") -> str:
    return "—" if v is None else fmt.format(v) + unit


def _kpi_rows(k: Kpis) -> list[tuple[str, str]]:
    """The KPI table's rows, "—" where nothing measured or computed the figure."""
    hbm_used = None
    if k.hbm_used_bytes is not None:
        hbm_used = f"{k.hbm_used_bytes / 1e9:.1f} / {k.hbm_capacity_bytes / 1e9:.0f} GB ({_num(k.hbm_use_percent)}%)"
    return [
        ("step time", _num(k.step_time_ms, "{:.3f}", " ms") + (f"  [dim]({k.step_time_source})[/]" if k.step_time_source else "")),
        ("device duty cycle", _num(k.device_duty_cycle_percent, unit="%")),
        ("collectives (exposed)", _num(k.collective_percent, unit="%")),
        ("compute-bound ops", _num(k.compute_bound_percent, unit="%")),
        ("HBM-bound ops", _num(k.hbm_bound_percent, unit="%")),
        ("host/input wait", _num(k.host_wait_percent, unit="%")),
        ("idle", _num(k.idle_percent, unit="%")),
        ("MFU", _num(k.mfu_percent, unit="%") + (f"  [dim]({k.mfu_source})[/]" if k.mfu_source else "")
         + (f"  [dim](model from {escape(k.model_source)})[/]" if k.model_source and k.model_source != "run.yaml"
            else "")),
        ("achieved TFLOP/s per chip", _num(k.achieved_tflops_per_chip, "{:.3g}")),
        ("tokens/s", _num(k.tokens_per_second, "{:,.0f}")
         + ("  [dim](measured)[/]" if k.step_time_source == "measured-tokens" else
            "  [dim](batch x seq from config)[/]" if k.shape_source and k.shape_source != "run.yaml" else "")),
        ("HBM use", hbm_used or "—"),
        ("step covered by listed ops", _num(k.op_coverage_percent, unit="%")
         + (f"  [dim](shares from {k.attribution_source})[/]" if k.attribution_source else "")),
    ]


def _kpi_table(title: str, rows: list[tuple[str, str]]) -> Table:
    kt = Table(title=title, title_justify="left", show_header=True)
    kt.add_column("KPI")
    kt.add_column("value", justify="right")
    for name, value in rows:
        kt.add_row(name, value)
    return kt


_SPLIT_NAMES = {"compute": "compute", "hbm": "HBM-bound work", "communication": "exposed collectives",
                "pipeline_bubble": "pipeline bubble", "moe_overhead": "MoE per-layer overhead",
                "moe_dispatch": "MoE routed path (TPU)",
                "offload": "ZeRO offload wait", "fixed": "fixed per-step time"}


def _predicted_table(p: PredictedStep) -> Table:
    """The cost model's step for a run without a profile, labelled as a prediction in its title and values."""
    t = Table(title=f"{PREDICTED}: the cost model's step, " + ("calibrated on the measurement" if p.calibrated
                                                                  else "uncalibrated"),
              title_justify="left", show_header=True)
    t.add_column("predicted")
    t.add_column("value", justify="right")
    t.add_row("step time", f"{p.step_time_ms:,.1f} ms  [dim]({p.step_time_low_ms:,.0f}–{p.step_time_high_ms:,.0f})[/]")
    t.add_row("MFU", _num(p.mfu_percent, unit="%"))
    t.add_row("tokens/s", _num(p.tokens_per_second, "{:,.0f}"))
    mem = f"{p.memory_per_chip_bytes / 1e9:.1f} / {p.memory_capacity_bytes / 1e9:.0f} GB"
    fit = fmt.memory_fit(p.model_dump())  # plain text: figures and fixed words only
    t.add_row("memory per chip", mem + (f"  [bold red]{fit.strip()}[/]" if p.memory_fit == "does_not_fit"
                                        else f"  [yellow]{fit.strip()}[/]" if fit else ""))
    for key, share in p.split_percent.items():
        t.add_row(f"  {_SPLIT_NAMES.get(key, key)}", f"{share:.1f}%")
    return t


def print_damage(report: AnalysisReport, console: Console) -> None:
    """Partial damage first: the profile files that were skipped, before any number that rests on the rest."""
    for problem in report.damaged_inputs:
        console.print(f"[bold yellow]warning:[/] {escape(problem)}")
    if report.damaged_inputs:
        console.print("[yellow]the analysis below rests on the other profile files; its confidence is lowered[/]")
        console.print()


def render_report(report: AnalysisReport, console: Console) -> None:
    """The human-readable form of a report: headline, KPIs, top ops, evidence, conflicts, gaps."""
    d, k, r = report.diagnosis, report.kpis, report.run
    print_damage(report, console)
    label = LABEL[d.bottleneck]
    colour = {"compute": "green", "hbm": "yellow", "communication": "magenta", "host": "cyan"}[d.bottleneck]
    head = f"[bold]Run {escape(r.id)} is [{colour}]{label}[/{colour}][/] (confidence {d.confidence:.2f})"
    if d.near_optimal:
        head += " — [green]near-optimal[/]"
    console.print(head)
    console.print(escape(d.summary))
    mesh = f", mesh {escape(r.mesh_short)}" if r.mesh_short else ""
    if r.model:
        model = f", model {escape(r.model)}" + (f" ({_params(r.params)} params)" if r.params else "")
    else:
        model = f", model of {_params(r.params)} params" if r.params else ", model unknown"
    console.print(f"[dim]{escape(r.chip_name)} x {r.num_chips}" + (f" in {r.num_slices} slices" if r.num_slices > 1 else "") + f"{mesh}{model}[/]")
    console.print()

    if report.predicted is not None:
        console.print(_predicted_table(report.predicted))
        measured = [(name, value) for name, value in _kpi_rows(k) if not value.startswith("—")]
        if measured:
            console.print(_kpi_table("KPIs (measured)", measured))
        else:
            console.print("[dim]KPIs: none measured (no profile, and run.yaml's measured: states no step time, "
                          "tokens/s, MFU or memory peak)[/]")
    else:
        console.print(_kpi_table("KPIs", _kpi_rows(k)))

    if report.top_ops:
        # Numbers never wrap (a number split over two lines reads as two numbers); the op name folds, and the
        # "bound by" verdict wraps between the verdict and its source. No vertical rules, so it fits 80 columns.
        ot = Table(title=f"Top {len(report.top_ops)} ops by time (roofline)", title_justify="left",
                   box=box.SIMPLE_HEAD, padding=(0, 0), show_edge=False)
        ot.add_column("#", justify="right", no_wrap=True, min_width=2)
        ot.add_column("op", overflow="fold", min_width=10, ratio=1)
        ot.add_column("kind", no_wrap=True)
        for col in ("% step", "ms/step", "GFLOP/step", "FLOP/B"):
            ot.add_column(col, justify="right", no_wrap=True)
        ot.add_column("bound by", min_width=9)
        ot.add_column("eff.", justify="right", no_wrap=True)
        for i, op in enumerate(report.top_ops, 1):
            ot.add_row(
                str(i),
                escape(op.name if len(op.name) <= 60 else op.name[:57] + "..."),
                op.kind,
                f"{op.time_percent:.1f}",
                _num(op.time_per_step_ms, "{:.3f}"),
                _num(op.flops / 1e9 if op.flops is not None else None, "{:,.1f}"),
                _num(op.arithmetic_intensity, "{:.1f}"),
                f"{op.bound_by} [dim]({op.bound_by_source})[/]",
                _num(op.roofline_efficiency * 100 if op.roofline_efficiency is not None else None, "{:.0f}", "%"),
            )
        console.print(ot)

    console.print("[bold]Evidence[/]")
    for e in d.evidence:
        console.print(f"  • {escape(e.statement)}  [dim]\\[{escape(e.signal)}][/]")
    if d.secondary:
        console.print(f"[bold]Secondary[/]: {', '.join(d.secondary)}")
    if d.conflicts:
        console.print("[bold]Conflicts[/]")
        for c in d.conflicts:
            console.print(f"  • {escape(c)}")
    console.print(f"[bold]Confidence {d.confidence:.2f}[/]")
    for reason in d.confidence_reasons:
        console.print(f"  • {escape(reason)}")
    if report.unavailable:
        console.print("[bold]Unavailable[/]")
        for u in report.unavailable:
            console.print(f"  • {escape(u)}")
    if report.warnings:
        console.print("[bold yellow]Warnings[/]")
        for w in report.warnings:
            console.print(f"  • {escape(w)}")


@cli.command("why")
@click.argument("run_id", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Print the AnalysisReport JSON only (docs/json-output.md).")
@click.option("--top", "top_n", type=click.IntRange(0, 1000), default=DEFAULT_TOP_N, show_default=True,
              help="How many top ops to list.")
@click.option("--session", default=None, help="Profile session to read (plugins/profile/<session>); default: newest.")
@click.option("--write-back", is_flag=True,
              help="Record the diagnosis on the run in its store (MLflow tags and note; needs ASAP_MLFLOW_WRITE_BACK=1).")
@click.pass_context
def why_cmd(ctx: click.Context, run_id: str, as_json: bool, top_n: int, session: str | None, write_back: bool) -> None:
    """Diagnose why RUN is slow: bottleneck, KPIs, top ops on the roofline, evidence, confidence."""
    store = _store(ctx)
    run = store.get(run_id, session=session)
    report = analyze_run(run, top_n=top_n)
    if write_back:
        d = report.diagnosis
        store.write_back(run, {"asap.bottleneck": str(d.bottleneck.value if hasattr(d.bottleneck, "value") else d.bottleneck),
                               "asap.confidence": f"{d.confidence:.2f}"}, f"ASAP: {d.summary}")
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        render_report(report, _console())
    require_usable_config(run)


def require_usable_config(run: Run) -> None:
    """Exit 2 (AsapError) when the config run.yaml names cannot be used: that is unusable input, not damage."""
    _, _, problems = load_mesh(run)
    if problems:
        text = problems[0].removeprefix("sharding config not used: ")
        raise AsapError(text, hint=None if "hint:" in text else
                        "fix the config (or drop 'config:' from run.yaml to analyse without a mesh)")


__all__ = ["render_report", "runs_cmd", "show_cmd", "why_cmd"]
