"""Load a run's profile: find its files, read each with the right reader, merge them into one Profile.

Files come from ``run.yaml``'s ``profile:`` list (files or folders, resolved with :meth:`Run.path` so a
name can never point outside the run folder) or, when it is omitted, from the run folder itself:
``overview_page.json``, ``op_profile.json``, ``roofline_model.json``, ``hlo_stats.json`` (any ``*.json``
whose name contains the tool name), ``*.trace.json.gz`` / ``*.trace.json``, ``*.hlo.txt`` / ``*.hlo``, and
``plugins/profile/*/*.xplane.pb`` (with the session's ``*.trace.json.gz``).

A file that cannot be read becomes a warning in the Profile, so one bad export does not hide the rest;
only when nothing usable is found does loading fail, naming the folder and the file names expected.
"""

from __future__ import annotations

from pathlib import Path

from bot.errors import AsapError, ProfileError
from bot.profiles.hlo_text import read_hlo_text
from bot.profiles.merge import merge_profiles
from bot.profiles.model import CollectiveOp, Profile
from bot.profiles.trace_events import read_trace_events
from bot.profiles.xplane import read_xplane
from bot.profiles.xprof_export import read_xprof_export, tool_of
from bot.runs.store import Run

EXPECTED = (
    "overview_page.json, op_profile.json, roofline_model.json, hlo_stats.json, *.trace.json.gz, "
    "*.hlo.txt, plugins/profile/<session>/*.xplane.pb"
)
MAX_DISCOVERED = 64  # files of one kind read from a folder; more is almost surely the wrong folder


def kind_of(path: Path) -> str | None:
    """Which reader handles a file, from its name: a tool name, ``trace``, ``hlo`` or ``xplane``."""
    name = path.name.lower()
    if name.endswith(".xplane.pb"):
        return "xplane"
    if name.endswith((".trace.json.gz", ".trace.json")):
        return "trace"
    if name.endswith((".hlo.txt", ".hlo")):
        return "hlo"
    return tool_of(path)


def discover(folder: Path) -> list[Path]:
    """Profile files in a folder (not recursive, except the XProf session layout), sorted by name."""
    found: list[Path] = []
    try:
        children = sorted(folder.iterdir())
    except OSError:
        return []
    for child in children:
        if child.is_file() and kind_of(child) is not None:
            found.append(child)
    sessions = folder / "plugins" / "profile"
    if sessions.is_dir():
        for session in sorted(sessions.iterdir()):
            if session.is_dir():
                found.extend(
                    f
                    for f in sorted(session.iterdir())[:MAX_DISCOVERED]
                    if f.is_file() and kind_of(f) in ("xplane", "trace")
                )
    return found[: MAX_DISCOVERED * 4]


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)


def _read_all(files: list[Path], base: Path, warnings: list[str], unreadable: list[str] | None = None) -> Profile:
    """Read every file; a damaged one becomes a warning and an ``unreadable`` entry (partial damage)."""
    unreadable = list(unreadable or [])
    parts: list[tuple[str, Profile]] = []
    collectives: list[CollectiveOp] = []
    hlo_sources: list[str] = []
    xplanes: dict[Path, list[Path]] = {}
    root = base.resolve()
    for path in files:
        kind = kind_of(path)
        source = _relative(path, base)
        resolved = path.resolve()
        if resolved != root and root not in resolved.parents:
            warnings.append(f"{source}: skipped, it links outside the run folder")
            continue
        try:
            if kind == "xplane":
                xplanes.setdefault(path.parent, []).append(path)
            elif kind == "trace":
                parts.append(("trace", read_trace_events(path, source=source)))
            elif kind == "hlo":
                collectives.extend(read_hlo_text(path, source=source))
                hlo_sources.append(source)
            elif kind is not None:
                parts.append((kind, read_xprof_export(path, kind, source=source)))
            else:
                warnings.append(f"{source}: not a profile file ASAP reads (expected one of {EXPECTED})")
        except ProfileError as exc:
            warnings.append(exc.render())
            unreadable.append(exc.render())
    for paths in xplanes.values():
        try:
            parts.append(("xplane", read_xplane(paths, sources=[_relative(p, base) for p in paths])))
        except AsapError as exc:  # ProfileError, or xprof not installed
            warnings.append(exc.render())
            unreadable.append(exc.render())
    profile = merge_profiles(parts, collectives)
    profile.sources.extend(hlo_sources)
    profile.warnings = warnings + profile.warnings
    profile.unreadable = unreadable + profile.unreadable
    return profile


def _usable(profile: Profile) -> bool:
    return bool(
        profile.ops
        or profile.collectives
        or profile.step_time_us is not None
        or profile.device_duty_cycle_percent is not None
    )


def _expand(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(discover(p))
        else:
            out.append(p)
    return out


def load_profile_files(paths: list[Path], base: Path) -> Profile:
    """Read and merge the given profile files/folders (each must lie inside ``base``); for tools and tests."""
    root = base.resolve()
    warnings: list[str] = []
    checked: list[Path] = []
    for p in paths:
        full = (base / p).resolve() if not p.is_absolute() else p.resolve()
        if full != root and root not in full.parents:
            raise ProfileError(f"{str(p)!r} is outside {base}; profile files must be inside it", field="profile")
        if not full.exists():
            warnings.append(f"{_relative(full, base)}: profile file does not exist")
            continue
        checked.append(full)
    profile = _read_all(_expand(checked), base, warnings, list(warnings))
    if not _usable(profile):
        raise _nothing_usable(base, profile)
    return profile


def load_profile(run: Run) -> Profile:
    """The run's profile: the files run.yaml names, else those discovered in the run folder, merged."""
    warnings: list[str] = []
    if run.record.profile:
        paths = []
        for entry in run.record.profile:
            full = run.path(entry, field="profile")
            if not full.exists():
                warnings.append(f"{entry}: profile file named in run.yaml does not exist")
                continue
            paths.append(full)
        files = _expand(paths)
    else:
        files = discover(run.folder)
    profile = _read_all(files, run.folder, warnings, list(warnings))
    if not _usable(profile):
        raise _nothing_usable(run.folder, profile)
    return profile


class NoProfileData(ProfileError):
    """No usable profile data for a run: the answer can still be a pre-flight one (``bot.analysis.preflight``).

    ``read_sources`` lists the files that were read but held nothing usable (empty when none was found),
    ``warnings`` what went wrong with them.
    """

    def __init__(self, message: str, *, read_sources: list[str], warnings: list[str], **kw: str) -> None:
        self.read_sources = read_sources
        self.warnings = warnings
        super().__init__(message, **kw)


def _nothing_usable(folder: Path, profile: Profile) -> ProfileError:
    detail = "; ".join(profile.warnings[:3])
    return NoProfileData(
        f"no usable profile data found (looked for {EXPECTED})" + (f"; {detail}" if detail else ""),
        read_sources=list(profile.sources),
        warnings=list(profile.warnings),
        source=str(folder),
        field="profile",
        hint="list the profile files in run.yaml under 'profile:', or put XProf exports beside run.yaml",
    )
