"""The knowledge index: BM25 (LlamaIndex ``BM25Retriever``) over playbook sections and history records.

No embedding model is needed. Every document is a LlamaIndex ``TextNode`` whose metadata carries what a
proposal cites (playbook file + heading anchor, or PR URL / commit) and what retrieval filters on (kind,
source, chip family, chip count, bottleneck, model size band). Metadata is excluded from the BM25 text so
filter values do not skew scores.

Persistence (``<state dir>/index/``): ``docstore.json`` (LlamaIndex ``SimpleDocumentStore`` with a content
hash per document), ``bm25/`` (``BM25Retriever.persist``) and ``manifest.json``. :meth:`KnowledgeIndex.update`
is incremental: documents whose hash is unchanged are not touched, new/changed ones are upserted, vanished
ones deleted; BM25's term statistics are corpus-wide (bm25s has no insert), so when anything changed the
BM25 matrix is rebuilt from the docstore — when nothing changed, nothing is rewritten.

Filtering: ``BM25Retriever`` accepts ``MetadataFilters`` only at construction (it turns them into a
``corpus_weight_mask``). Per-query filters here use that same mechanism — a weight mask computed from
metadata columns held as numpy arrays — so masked documents score zero before top-k selection (not a
post-retrieval filter). A document that does not state a field (a general playbook section, a record
with unknown chip) matches any value of that field.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from bot.errors import AsapError
from knowledge.history import HistoryRecord, state_dir
from knowledge.playbooks import PLAYBOOKS_DIR, PlaybookSection, load_playbooks

INDEX_VERSION = 1
FILTER_FIELDS = ("kind", "source", "chip_family", "bottleneck", "size_band")
_ANY = "any"

logging.getLogger("bm25s").setLevel(logging.WARNING)
logging.getLogger("llama_index.retrievers.bm25").setLevel(logging.ERROR)


class Filters(BaseModel):
    """What to restrict retrieval to. Unset fields do not filter; documents that leave a field unset match."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["playbook", "history"] | None = None
    source: Literal["playbook", "git", "github", "applied"] | None = None
    chip_family: Literal["tpu", "gpu", "cpu"] | None = None
    bottleneck: Literal["compute", "hbm", "communication", "host"] | None = None
    size_band: Literal["lt1b", "1-10b", "10-100b", "gt100b"] | None = None
    chip_count_min: int | None = Field(default=None, gt=0)
    chip_count_max: int | None = Field(default=None, gt=0)


@dataclass(frozen=True)
class Hit:
    """One retrieved passage with what a person needs to check it."""

    doc_id: str
    kind: Literal["playbook", "history"]
    score: float
    title: str
    citation: str  # playbooks/<file>.md#<anchor>, a PR URL, or a commit reference
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def file(self) -> str | None:
        return self.metadata.get("file")

    @property
    def anchor(self) -> str | None:
        return self.metadata.get("anchor")


@dataclass(frozen=True)
class UpdateStats:
    added: int
    changed: int
    removed: int
    unchanged: int
    rebuilt: bool
    documents: int
    seconds: float


@dataclass(frozen=True)
class _Doc:
    doc_id: str
    text: str
    metadata: dict[str, Any]

    @property
    def hash(self) -> str:
        blob = json.dumps([self.text, self.metadata], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def playbook_doc(section: PlaybookSection) -> _Doc:
    """A playbook section as an index document (title = heading path, so heading words count)."""
    meta = {
        "kind": "playbook",
        "source": "playbook",
        "title": " > ".join(section.heading_path),
        "citation": section.ref,
        "file": section.file,
        "anchor": section.anchor,
        "bottleneck": section.metadata.get("bottleneck", _ANY),
        "chip_family": section.metadata.get("chip_family", _ANY),
        "size_band": _ANY,
        "chip_count": 0,
        "move_ids": ",".join(section.move_ids),
    }
    return _Doc(f"playbook:{section.ref}", f"{' - '.join(section.heading_path)}\n{section.text}", meta)


def history_doc(record: HistoryRecord) -> _Doc:
    """A history record as an index document."""
    meta = {
        "kind": "history",
        "source": record.source,
        "title": record.title,
        "citation": record.ref,
        "record_id": record.id,
        "outcome": record.outcome,
        "change_kind": record.kind or "",
        "bottleneck": record.bottleneck or _ANY,
        "chip_family": record.chip_family or _ANY,
        "size_band": record.size_band or _ANY,
        "chip_count": record.chip_count or 0,
        "run_ids": ",".join(record.run_ids),
    }
    return _Doc(f"history:{record.id}", record.text(), meta)


def _node(doc: _Doc):  # type: ignore[no-untyped-def]
    from llama_index.core.schema import TextNode

    keys = list(doc.metadata)
    return TextNode(
        id_=doc.doc_id,
        text=doc.text,
        metadata=dict(doc.metadata),
        excluded_embed_metadata_keys=keys,
        excluded_llm_metadata_keys=keys,
    )


class KnowledgeIndex:
    """Build, update, persist and query the BM25 index. Thread-safe for queries."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else state_dir() / "index"
        self._lock = threading.Lock()
        self._retriever: Any = None
        self._columns: dict[str, np.ndarray] = {}
        self._count = np.zeros(0, dtype=np.int64)
        self._hashes: dict[str, str] = {}
        self._docstore: Any = None

    # ------------------------------------------------------------------ persistence
    @property
    def _docstore_path(self) -> Path:
        return self.root / "docstore.json"

    @property
    def _bm25_dir(self) -> Path:
        return self.root / "bm25"

    @property
    def _manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def exists(self) -> bool:
        return self._manifest_path.is_file() and self._docstore_path.is_file()

    def _load_docstore(self) -> Any:
        from llama_index.core.storage.docstore import SimpleDocumentStore

        if self._docstore is None:
            if self._docstore_path.is_file():
                try:
                    self._docstore = SimpleDocumentStore.from_persist_path(str(self._docstore_path))
                except (OSError, ValueError, KeyError) as exc:
                    raise AsapError(
                        f"the index docstore cannot be read ({exc}); delete the folder and run 'asap index'",
                        source=str(self._docstore_path),
                    ) from None
                self._hashes = {
                    doc_id: h for doc_id in self._docstore.docs if (h := self._docstore.get_document_hash(doc_id))
                }
            else:
                self._docstore = SimpleDocumentStore()
                self._hashes = {}
        return self._docstore

    def load(self) -> KnowledgeIndex:
        """Open the persisted index; :class:`AsapError` when it was never built."""
        from llama_index.retrievers.bm25 import BM25Retriever

        if not self.exists():
            raise AsapError("no knowledge index yet", source=str(self.root), hint="run 'asap index' to build it")
        manifest = json.loads(self._manifest_path.read_text(encoding="utf-8"))
        if manifest.get("version") != INDEX_VERSION:
            raise AsapError(
                f"index version {manifest.get('version')!r}, expected {INDEX_VERSION}", source=str(self._manifest_path),
                hint="run 'asap index' to rebuild it",
            )
        self._load_docstore()
        if manifest.get("documents", 0) and self._bm25_dir.is_dir():
            self._retriever = BM25Retriever.from_persist_dir(str(self._bm25_dir), show_progress=False)
            self._set_columns(self._retriever.corpus)
        else:
            self._retriever = None
        return self

    def _set_columns(self, corpus: Sequence[dict[str, Any]]) -> None:
        self._columns = {f: np.array([str(c.get(f, _ANY)) for c in corpus], dtype=object) for f in FILTER_FIELDS}
        self._count = np.array([int(c.get("chip_count") or 0) for c in corpus], dtype=np.int64)

    # ------------------------------------------------------------------ building
    def update(
        self, *, playbooks_dir: Path | None = PLAYBOOKS_DIR, history: Iterable[HistoryRecord] = ()
    ) -> UpdateStats:
        """Make the index hold exactly these playbook sections and history records; touch only what changed."""
        from llama_index.retrievers.bm25 import BM25Retriever

        t0 = time.perf_counter()
        docs: dict[str, _Doc] = {}
        if playbooks_dir is not None:
            for sec in load_playbooks(playbooks_dir):
                d = playbook_doc(sec)
                docs[d.doc_id] = d
        for rec in history:
            d = history_doc(rec)
            docs[d.doc_id] = d
        store = self._load_docstore()
        wanted = {doc_id: d.hash for doc_id, d in docs.items()}
        new = [i for i in wanted if i not in self._hashes]
        changed = [i for i in wanted if i in self._hashes and self._hashes[i] != wanted[i]]
        removed = [i for i in self._hashes if i not in wanted]
        unchanged = len(wanted) - len(new) - len(changed)
        dirty = bool(new or changed or removed) or not self.exists()
        if dirty:
            upserts = [_node(docs[i]) for i in (*new, *changed)]
            if upserts:
                store.add_documents(upserts, allow_update=True)
                store.set_document_hashes({i: wanted[i] for i in (*new, *changed)})
            for i in removed:
                store.delete_document(i, raise_error=False)
            self._hashes = {i: wanted[i] for i in wanted}
            self.root.mkdir(parents=True, exist_ok=True)
            store.persist(str(self._docstore_path))
            if docs:
                stored = store.docs  # one read: the property deserializes every node on each access
                nodes = [stored[i] for i in docs]  # stable order = document order
                retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=min(10, len(nodes)))
                self._bm25_dir.mkdir(parents=True, exist_ok=True)
                retriever.persist(str(self._bm25_dir), show_progress=False)
                self._retriever = retriever
                self._set_columns(retriever.corpus)
            else:
                self._retriever = None
                self._set_columns([])
            self._manifest_path.write_text(
                json.dumps({"version": INDEX_VERSION, "documents": len(docs), "updated": time.time()}, indent=2),
                encoding="utf-8",
            )
        elif self._retriever is None:
            self.load()
        return UpdateStats(
            added=len(new), changed=len(changed), removed=len(removed), unchanged=unchanged, rebuilt=dirty,
            documents=len(docs), seconds=time.perf_counter() - t0,
        )

    # ------------------------------------------------------------------ querying
    def _mask(self, filters: Filters | None) -> np.ndarray | None:
        if filters is None:
            return None
        n = len(self._count)
        mask = np.ones(n, dtype=bool)
        active = False
        for f in FILTER_FIELDS:
            want = getattr(filters, f)
            if want is None:
                continue
            active = True
            col = self._columns[f]
            mask &= (col == want) | (col == _ANY)
        if filters.chip_count_min is not None:
            active = True
            mask &= (self._count == 0) | (self._count >= filters.chip_count_min)
        if filters.chip_count_max is not None:
            active = True
            mask &= (self._count == 0) | (self._count <= filters.chip_count_max)
        return mask if active else None

    def retrieve(self, query: str, *, filters: Filters | None = None, k: int = 5) -> list[Hit]:
        """The ``k`` best passages for ``query`` among documents that pass ``filters`` (score > 0 only)."""
        if not isinstance(query, str) or not query.strip():
            raise AsapError("empty query", field="query", hint="say what to look for, e.g. 'tensor to fsdp on v5p'")
        if k < 1:
            raise AsapError(f"k must be at least 1, got {k}", field="k")
        if self._retriever is None:
            if not self.exists():
                raise AsapError("no knowledge index yet", source=str(self.root), hint="run 'asap index' to build it")
            self.load()
            if self._retriever is None:
                return []
        mask = self._mask(filters)
        if mask is not None and not mask.any():
            return []
        with self._lock:
            r = self._retriever
            r.similarity_top_k = min(k, len(self._count))
            r.corpus_weight_mask = mask.astype(np.int8).tolist() if mask is not None else None
            try:
                found = r.retrieve(query)
            finally:
                r.corpus_weight_mask = None
        hits = []
        for nws in found:
            if nws.score is None or nws.score <= 0:
                continue
            meta = dict(nws.node.metadata)
            hits.append(
                Hit(
                    doc_id=nws.node.node_id,
                    kind=meta.get("kind", "history"),
                    score=float(nws.score),
                    title=str(meta.get("title", "")),
                    citation=str(meta.get("citation", "")),
                    text=nws.node.get_content(),
                    metadata=meta,
                )
            )
        return hits

    def __len__(self) -> int:
        return len(self._count)


def open_index(root: Path | None = None) -> KnowledgeIndex:
    """The persisted index under ``root`` (default ``<state dir>/index``), loaded."""
    return KnowledgeIndex(root).load()
