"""Where runs come from: a store interface and the local-folder implementation.

The embedded default reads ``<runs dir>/<run id>/run.yaml`` with the profile files beside it. Lookup is
forgiving ("job 123", "run-123", "#123", "123" all find run ``123``), and an unknown ID lists the
nearest known ones.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import yaml
from pydantic import ValidationError

from bot import yamlsafe
from bot.errors import AsapError, RunNotFound, brief
from bot.resources import sample_runs_dir
from bot.runs.record import RunRecord

DEFAULT_RUNS_DIR = sample_runs_dir()
"""The bundled sample runs: the runs folder when neither ``--runs-dir`` nor ``ASAP_RUNS_DIR`` is given."""
RUN_FILE = "run.yaml"
MAX_RUN_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class Run:
    """A run record together with the folder its files live in."""

    record: RunRecord
    folder: Path
    origin: str | None = None  # where the run was found (a store URL); None = the local folder itself

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def where(self) -> str:
        """Where the run was found, for people: the store URL it came from, or its local folder."""
        return self.origin or str(self.folder)

    def path(self, relative: str, *, field: str) -> Path:
        """Resolve a file named in run.yaml, refusing anything outside the run folder."""
        candidate = (self.folder / relative).resolve()
        root = self.folder.resolve()
        if candidate != root and root not in candidate.parents:
            raise AsapError(
                f"{relative!r} points outside the run folder", source=str(self.folder / RUN_FILE), field=field
            )
        return candidate


class RunStore(Protocol):
    """Any source of runs: the local folder here, a team's store in production."""

    def list_ids(self) -> list[str]: ...

    def get(self, query: str, *, session: str | None = None) -> Run: ...


_PREFIX = re.compile(r"^\s*(?:(?:job|run|training\s+run|experiment)\s*[-_:#]?\s*|#)", re.IGNORECASE)


def normalize_run_query(query: str) -> str:
    """Strip the words people put around a run ID: "job 123", "run-123", "#123" -> "123"."""
    text = query.strip().strip("`'\".,?!")
    return _PREFIX.sub("", text).strip()


def load_run_file(path: Path) -> RunRecord:
    """Read and validate one run.yaml; errors name the file and the field."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise AsapError(f"cannot read run file: {exc.strerror}", source=str(path)) from None
    if size > MAX_RUN_FILE_BYTES:
        raise AsapError(f"run file is {size} bytes; expected a small YAML file (< 1 MiB)", source=str(path))
    try:
        raw = yamlsafe.load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise AsapError("run file is not UTF-8 text", source=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise AsapError(f"malformed YAML{where}: {getattr(exc, 'problem', exc)}", source=str(path)) from None
    if not isinstance(raw, dict):
        raise AsapError(f"expected a mapping of run fields, got {type(raw).__name__}", source=str(path))
    try:
        return RunRecord.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        got = f" (got {brief(err['input'])})" if "input" in err and not isinstance(err["input"], dict) else ""
        raise AsapError(f"{err['msg']}{got}", source=str(path), field=loc) from None


def _is_output_folder(folder: Path) -> bool:
    """A MaxText output folder or JAX logdir without run.yaml (read by :mod:`bot.runs.maxtext_output`)."""
    return folder.is_dir() and (
        (folder / "config.yml").is_file()
        or (folder / "tensorboard" / "plugins" / "profile").is_dir()
        or (folder / "plugins" / "profile").is_dir()
    )


class LocalRunStore:
    """Runs stored as folders: ``<root>/<run id>/run.yaml`` plus profile files."""

    def __init__(self, root: Path | str | None = None) -> None:
        env = os.environ.get("ASAP_RUNS_DIR")
        self.root = Path(root) if root is not None else (Path(env) if env else DEFAULT_RUNS_DIR)

    def _folders(self) -> dict[str, Path]:
        if not self.root.is_dir():
            raise AsapError("runs directory does not exist", source=str(self.root), hint="set --runs-dir or ASAP_RUNS_DIR")
        found: dict[str, Path] = {}
        for child in sorted(self.root.iterdir()):
            if (child / RUN_FILE).is_file() or _is_output_folder(child):
                found[child.name] = child
        return found

    def list_ids(self) -> list[str]:
        """Folder names of every run (a run's ID is its folder name)."""
        return list(self._folders())

    def list_runs(self) -> list[Run]:
        """Every readable run; unreadable ones raise so a broken file is never silently skipped."""
        return [self._load(folder) for folder in self._folders().values()]

    def _load(self, folder: Path, session: str | None = None) -> Run:
        if not (folder / RUN_FILE).is_file():
            from bot.runs.maxtext_output import record_from_output

            return Run(record=record_from_output(folder, folder.name, origin=str(folder), session=session), folder=folder)
        record = load_run_file(folder / RUN_FILE)
        if record.id != folder.name:
            raise AsapError(
                f"run id {record.id!r} does not match its folder name {folder.name!r}",
                source=str(folder / RUN_FILE),
                field="id",
            )
        return Run(record=record, folder=folder)

    def get(self, query: str, *, session: str | None = None) -> Run:
        """Find a run by a forgiving ID; unknown IDs raise :class:`RunNotFound` with the nearest ones."""
        folders = self._folders()
        wanted = normalize_run_query(query)
        for candidate in (wanted, query.strip()):
            if candidate in folders:
                return self._load(folders[candidate], session)
        lowered = {k.lower(): k for k in folders}
        if wanted.lower() in lowered:
            return self._load(folders[lowered[wanted.lower()]], session)
        # "123" also finds "run-123" / "job_123" folders.
        suffix = [k for k in folders if normalize_run_query(k).lower() == wanted.lower()]
        if len(suffix) == 1:
            return self._load(folders[suffix[0]], session)
        near = difflib.get_close_matches(wanted, list(folders), n=3, cutoff=0.3)
        hint = f"nearest known runs: {', '.join(near)}" if near else f"known runs: {', '.join(list(folders)[:10])}"
        raise RunNotFound(f"no run {brief(wanted)} in the runs folder", source=str(self.root), field="run", hint=hint)
