"""Open the configured run stores and search them in order.

``open_runs()`` is what every front end calls (CLI, agents, Slack, GitHub): it reads ``--runs`` /
``ASAP_RUNS`` (store URLs, :mod:`bot.runs.spec`), else ``--runs-dir`` / ``ASAP_RUNS_DIR``, else the
bundled samples. A lookup tries each store in turn; a store that is down or refuses access makes only
its own lookups fail (the error names it), and a run found nowhere lists what each store said.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any

from bot.errors import AsapError, RunNotFound, StoreUnavailable
from bot.runs.spec import StoreSpec, parse_stores
from bot.runs.store import LocalRunStore, Run


def _open_one(spec: StoreSpec) -> Any:
    if spec.kind == "dir":
        return LocalRunStore(spec.location)
    if spec.kind == "mlflow":
        from bot.runs.mlflow_store import MlflowRunStore

        return MlflowRunStore(spec)
    from bot.runs.fsspec_store import FsspecRunStore

    return FsspecRunStore(spec)


@dataclass
class ChainStore:
    """Several stores searched in order; each entry is (spec, store or the error opening it)."""

    entries: list[tuple[StoreSpec, Any]]
    warnings: list[str] = field(default_factory=list)
    served_by: dict[str, Any] = field(default_factory=dict)  # run id -> the store it came from

    def _stores(self) -> list[tuple[StoreSpec, Any]]:
        out = []
        for spec, store in self.entries:
            if isinstance(store, AsapError):
                self._warn(f"{spec.display}: {store.message}")
                continue
            out.append((spec, store))
        return out

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def get(self, query: str, *, session: str | None = None) -> Run:
        """The first store that has the run; stores that fail are named if no store has it."""
        misses: list[AsapError] = []
        for spec, store in self._stores():
            try:
                run = store.get(query, session=session)
                self.served_by[run.id] = store
                return run
            except RunNotFound as exc:
                misses.append(exc)
            except StoreUnavailable as exc:  # this store is down: the others still answer
                self._warn(f"{spec.display}: {exc.message}")
                misses.append(exc)
            # any other AsapError: the run was found but is broken; say so rather than "not found"
        if len(misses) == 1 and not self.warnings:
            raise misses[0]
        hints = [m.hint for m in misses if m.hint]
        raise RunNotFound(
            f"no run {query.strip()[:80]!r} in {len(self.entries)} store(s)"
            + (f" ({'; '.join(self.warnings)})" if self.warnings else ""),
            field="run", hint="; ".join(hints) or None,
        )

    def write_back(self, run: Run, tags: dict[str, str], note: str | None) -> None:
        """Record ASAP's diagnosis on the run in the store it came from (stores that support it: MLflow)."""
        store = self.served_by.get(run.id)
        if store is None or not hasattr(store, "write_back"):
            raise AsapError("this run's store does not take write-back (only MLflow stores do)", field="--write-back")
        store.write_back(run, tags, note)

    def describe(self) -> list[str]:
        """The stores searched, as people configured them (the default is the runs folder's path)."""
        return [str(getattr(store, "root", "")) if spec.kind == "dir" and not spec.url else spec.display
                for spec, store in self.entries]

    def list_ids(self) -> list[str]:
        ids: list[str] = []
        for spec, store in self._stores():
            try:
                ids += [i for i in store.list_ids() if i not in ids]
            except AsapError as exc:
                self._warn(f"{spec.display}: {exc.message}")
        return ids

    def list_page(self, limit: int, token: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """One page across the stores; the token says which store and where in it to go on."""
        state = _decode(token)
        index, inner = state.get("i", 0), state.get("t")
        stores = self.entries
        rows: list[dict[str, Any]] = []
        failures: list[AsapError] = []
        while index < len(stores) and len(rows) < limit:
            spec, store = stores[index]
            try:
                page, nxt = _page_of(store, limit - len(rows), inner)
            except AsapError as exc:  # one store failing does not hide the others' runs ...
                self._warn(f"{spec.display}: {exc.message}")
                failures.append(exc)
                page, nxt = [], None
            if len(failures) == len(stores):
                raise failures[0]  # ... but when every store fails, that is the answer
            rows += [{**r, "where": r.get("where") or spec.display} for r in page]
            if nxt:
                return rows, _encode({"i": index, "t": nxt})
            index, inner = index + 1, None
        return rows, (_encode({"i": index}) if index < len(stores) else None)


def _page_of(store: Any, limit: int, token: Any) -> tuple[list[dict[str, Any]], Any]:
    if isinstance(store, AsapError):
        raise store
    if hasattr(store, "list_page"):
        return store.list_page(limit, token)  # type: ignore[no-any-return]
    ids = store.list_ids()
    start = int(token or 0)
    local = isinstance(store, LocalRunStore) or bool(getattr(store, "local", False))
    page = [{"id": i, "local": local} for i in ids[start:start + limit]]
    return page, (start + limit if start + limit < len(ids) else None)


def _encode(state: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(state).encode()).decode().rstrip("=")


def _decode(token: str | None) -> dict[str, Any]:
    if not token:
        return {}
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        state = json.loads(raw)
    except (ValueError, TypeError):
        raise AsapError("not a page token from `asap runs`", field="--page-token") from None
    if not isinstance(state, dict) or not isinstance(state.get("i", 0), int):
        raise AsapError("not a page token from `asap runs`", field="--page-token")
    return state


def open_runs(runs: str | None = None, runs_dir: str | None = None) -> ChainStore:
    """The configured stores: ``runs`` (or ASAP_RUNS) URLs, else the runs folder, else the samples."""
    text = runs if runs is not None else os.environ.get("ASAP_RUNS")
    specs = parse_stores(text)
    if not specs:
        return ChainStore([(StoreSpec(kind="dir", url=str(runs_dir or ""), location=str(runs_dir or "")),
                            LocalRunStore(runs_dir))])
    entries: list[tuple[StoreSpec, Any]] = []
    for spec in specs:
        try:
            entries.append((spec, _open_one(spec)))
        except AsapError as exc:
            entries.append((spec, exc))
    return ChainStore(entries)
