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

Querying does not import LlamaIndex or bm25s (together ~2 s of imports, bm25s pulls in jax): a
:class:`_Bm25Reader` opens the arrays ``BM25Retriever.persist`` wrote (bm25s' precomputed per-document
term scores, vocabulary and corpus) and scores a query exactly as ``BM25Retriever`` does — same token
pattern, English stopwords and Snowball stemmer (PyStemmer), saved beside the arrays at build time in
``bm25/query.json`` — so ``asap propose`` stays fast with a warm index. Tests check it returns what
LlamaIndex's retriever returns.

:func:`ensure_index` is what the proposal engine calls: it opens ``<state dir>/index``, and builds or
updates it first when it is missing or stale (a playbook file or ``history.jsonl`` changed since the
fingerprint in the manifest). Builds hold an exclusive file lock, readers a shared one, so concurrent
processes never read a half-written index.

Filtering: ``BM25Retriever`` accepts ``MetadataFilters`` only at construction (it turns them into a
``corpus_weight_mask``). Per-query filters here use that same mechanism — a weight mask computed from
metadata columns held as numpy arrays — so masked documents score zero before top-k selection (not a
post-retrieval filter). A document that does not state a field (a general playbook section, a record
with unknown chip) matches any value of that field.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from bot.errors import AsapError
from knowledge.history import HISTORY_FILE, HistoryRecord, HistoryStore, state_dir
from knowledge.playbooks import PLAYBOOKS_DIR, PlaybookSection, load_playbooks

INDEX_VERSION = 1
QUERY_FILE = "query.json"
LOCK_FILE = ".lock"
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



class _Bm25Reader:
    """Scores queries against the persisted bm25s arrays without importing LlamaIndex or bm25s.

    bm25s stores, per vocabulary term, the BM25 score of every document containing it (a CSC matrix:
    ``indptr``/``indices``/``data``); a query's score per document is the sum over its (stemmed,
    stopword-free) tokens of those columns, as ``bm25s.BM25.get_scores`` computes it.
    """

    def __init__(self, folder: Path) -> None:
        import Stemmer

        try:
            params = json.loads((folder / "params.index.json").read_text(encoding="utf-8"))
            self.vocab: dict[str, int] = json.loads((folder / "vocab.index.json").read_text(encoding="utf-8"))
            query = json.loads((folder / QUERY_FILE).read_text(encoding="utf-8"))
            self.data = np.load(folder / "data.csc.index.npy")
            self.indices = np.load(folder / "indices.csc.index.npy")
            self.indptr = np.load(folder / "indptr.csc.index.npy")
            nnoc = folder / "nonoccurrence_array.index.npy"
            self.nonoccurrence = np.load(nnoc) if nnoc.is_file() else None
            with (folder / "corpus.jsonl").open(encoding="utf-8") as fh:
                self.corpus: list[dict[str, Any]] = [json.loads(line) for line in fh if line.strip()]
        except (OSError, ValueError) as exc:
            raise AsapError(
                f"the BM25 index cannot be read ({exc}); delete the folder and run 'asap index'", source=str(folder)
            ) from None
        self.num_docs = int(params["num_docs"])
        self.dtype = np.dtype(params.get("dtype", "float32"))
        self.lower = bool(query.get("lower", True))
        self.split = re.compile(query["token_pattern"]).findall
        self.stopwords = frozenset(query.get("stopwords") or ())
        self.stemmer = Stemmer.Stemmer(query.get("stemmer", "english"))
        if len(self.corpus) != self.num_docs:
            raise AsapError(
                f"the BM25 corpus has {len(self.corpus)} documents, the scores {self.num_docs}; run 'asap index'",
                source=str(folder),
            )

    def token_ids(self, query: str) -> np.ndarray:
        words = [w for w in self.split(query.lower() if self.lower else query) if w not in self.stopwords]
        stems = self.stemmer.stemWords(words) if words else []
        return np.array([self.vocab[t] for t in stems if t in self.vocab], dtype=np.int64)

    def scores(self, query: str, mask: np.ndarray | None) -> np.ndarray:
        ids = self.token_ids(query)
        scores = np.zeros(self.num_docs, dtype=self.dtype)
        for t in ids:
            start, end = self.indptr[t], self.indptr[t + 1]
            np.add.at(scores, self.indices[start:end], self.data[start:end])
        if self.nonoccurrence is not None and ids.size:
            scores += self.nonoccurrence[ids].sum()
        if mask is not None:
            scores *= mask
        return scores


@contextmanager
def _locked(root: Path, exclusive: bool) -> Iterator[None]:
    """An advisory lock on ``root/.lock``: builders exclusive, readers shared (another process may be writing)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def sources_fingerprint(playbooks_dir: Path | None, history_file: Path | None) -> dict[str, Any]:
    """What the index was built from, cheaply: name, mtime and size of each playbook and of the history file."""
    books: list[list[Any]] = []
    if playbooks_dir is not None and Path(playbooks_dir).is_dir():
        for p in sorted(Path(playbooks_dir).glob("*.md")):
            st = p.stat()
            books.append([p.name, st.st_mtime_ns, st.st_size])
    hist = None
    if history_file is not None and Path(history_file).is_file():
        st = Path(history_file).stat()
        hist = [st.st_mtime_ns, st.st_size]
    return {"playbooks_dir": str(Path(playbooks_dir).resolve()) if playbooks_dir else None, "playbooks": books,
            "history": hist}


class KnowledgeIndex:
    """Build, update, persist and query the BM25 index. Thread-safe for queries."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else state_dir() / "index"
        self._lock = threading.Lock()
        self._reader: _Bm25Reader | None = None
        self._columns: dict[str, np.ndarray] = {}
        self._count = np.zeros(0, dtype=np.int64)
        self._hashes: dict[str, str] = {}
        self._docstore: Any = None
        self.manifest: dict[str, Any] = {}

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

    def _read_manifest(self) -> dict[str, Any]:
        try:
            manifest = json.loads(self._manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise AsapError(f"the index manifest cannot be read ({exc})", source=str(self._manifest_path),
                            hint="run 'asap index' to rebuild it") from None
        if not isinstance(manifest, dict) or manifest.get("version") != INDEX_VERSION:
            got = manifest.get("version") if isinstance(manifest, dict) else None
            raise AsapError(
                f"index version {got!r}, expected {INDEX_VERSION}", source=str(self._manifest_path),
                hint="run 'asap index' to rebuild it",
            )
        return manifest

    def load(self) -> KnowledgeIndex:
        """Open the persisted index for queries; :class:`AsapError` when it was never built."""
        if not self.exists():
            raise AsapError("no knowledge index yet", source=str(self.root), hint="run 'asap index' to build it")
        with _locked(self.root, exclusive=False):
            self.manifest = self._read_manifest()
            if self.manifest.get("documents", 0) and (self._bm25_dir / QUERY_FILE).is_file():
                self._reader = _Bm25Reader(self._bm25_dir)
                self._set_columns(self._reader.corpus)
            else:
                self._reader = None
                self._set_columns([])
        return self

    def _set_columns(self, corpus: Sequence[dict[str, Any]]) -> None:
        self._columns = {f: np.array([str(c.get(f, _ANY)) for c in corpus], dtype=object) for f in FILTER_FIELDS}
        self._count = np.array([int(c.get("chip_count") or 0) for c in corpus], dtype=np.int64)

    # ------------------------------------------------------------------ building
    def update(
        self,
        *,
        playbooks_dir: Path | None = PLAYBOOKS_DIR,
        history: Iterable[HistoryRecord] = (),
        fingerprint: dict[str, Any] | None = None,
    ) -> UpdateStats:
        """Make the index hold exactly these playbook sections and history records; touch only what changed.

        ``fingerprint`` (:func:`sources_fingerprint`) is stored in the manifest so :func:`ensure_index` can
        tell later, without reading the sources, whether the index is still current.
        """
        with _locked(self.root, exclusive=True):
            return self._update(playbooks_dir, history, fingerprint)

    def _update(
        self, playbooks_dir: Path | None, history: Iterable[HistoryRecord], fingerprint: dict[str, Any] | None
    ) -> UpdateStats:
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
        self._docstore = None  # another process may have updated the index since this object read it
        store = self._load_docstore()
        wanted = {doc_id: d.hash for doc_id, d in docs.items()}
        new = [i for i in wanted if i not in self._hashes]
        changed = [i for i in wanted if i in self._hashes and self._hashes[i] != wanted[i]]
        removed = [i for i in self._hashes if i not in wanted]
        unchanged = len(wanted) - len(new) - len(changed)
        dirty = bool(new or changed or removed) or not self.exists() or not (self._bm25_dir / QUERY_FILE).is_file()
        old_manifest: dict[str, Any] = {}
        if self._manifest_path.is_file():
            try:
                old_manifest = json.loads(self._manifest_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                dirty = True
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
                from bm25s.stopwords import STOPWORDS_EN

                stored = store.docs  # one read: the property deserializes every node on each access
                nodes = [stored[i] for i in docs]  # stable order = document order
                retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=min(10, len(nodes)))
                self._bm25_dir.mkdir(parents=True, exist_ok=True)
                retriever.persist(str(self._bm25_dir), show_progress=False)
                # How BM25Retriever tokenizes a query, so the reader does the same without importing it.
                (self._bm25_dir / QUERY_FILE).write_text(json.dumps({
                    "token_pattern": retriever.token_pattern, "lower": True, "stemmer": "english",
                    "stopwords": sorted(STOPWORDS_EN),
                }), encoding="utf-8")
        if dirty or fingerprint is not None and old_manifest.get("fingerprint") != fingerprint:
            manifest = {"version": INDEX_VERSION, "documents": len(docs), "updated": time.time()}
            if fingerprint is not None:
                manifest["fingerprint"] = fingerprint
            tmp = self._manifest_path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
            tmp.replace(self._manifest_path)
            self.manifest = manifest
        else:
            self.manifest = old_manifest
        if dirty or self._reader is None:
            if docs:
                self._reader = _Bm25Reader(self._bm25_dir)
                self._set_columns(self._reader.corpus)
            else:
                self._reader = None
                self._set_columns([])
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
        if self._reader is None:
            if not self.exists():
                raise AsapError("no knowledge index yet", source=str(self.root), hint="run 'asap index' to build it")
            self.load()
            if self._reader is None:
                return []
        reader = self._reader
        mask = self._mask(filters)
        if mask is not None and not mask.any():
            return []
        scores = reader.scores(query, mask.astype(reader.dtype) if mask is not None else None)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.lexsort((top, -scores[top]))]  # best first; ties in document order
        hits = []
        for i in top:
            score = float(scores[i])
            if score <= 0:
                continue
            meta = {k_: v for k_, v in reader.corpus[int(i)].items() if not k_.startswith("_")}
            doc_id = str(meta.pop("node_id", ""))
            for extra in ("doc_id", "document_id", "ref_doc_id"):
                meta.pop(extra, None)
            hits.append(
                Hit(
                    doc_id=doc_id,
                    kind=meta.get("kind", "history"),
                    score=score,
                    title=str(meta.get("title", "")),
                    citation=str(meta.get("citation", "")),
                    text=_node_text(reader.corpus[int(i)]),
                    metadata=meta,
                )
            )
        return hits

    def __len__(self) -> int:
        return len(self._count)


def _node_text(entry: dict[str, Any]) -> str:
    try:
        return str(json.loads(entry.get("_node_content") or "{}").get("text", ""))
    except ValueError:
        return ""


def open_index(root: Path | None = None) -> KnowledgeIndex:
    """The persisted index under ``root`` (default ``<state dir>/index``), loaded."""
    return KnowledgeIndex(root).load()


_OPEN: dict[str, tuple[tuple[int, int], KnowledgeIndex]] = {}
_OPEN_LOCK = threading.Lock()


def ensure_index(state: Path | None = None, *, playbooks_dir: Path = PLAYBOOKS_DIR) -> KnowledgeIndex:
    """The index under ``<state>/index`` (default ``$ASAP_STATE_DIR`` or ``.asap``), built or updated when stale.

    Stale = missing, or a playbook or ``history.jsonl`` changed (mtime/size) since the fingerprint in the
    manifest. Then the playbooks and history are re-read and :meth:`KnowledgeIndex.update` touches only the
    documents that changed. A current index is opened once per process and reused while its manifest is
    unchanged, so a warm call costs a few ``stat`` calls. Never called at import time.
    """
    state = Path(state) if state is not None else state_dir()
    root = state / "index"
    wanted = sources_fingerprint(playbooks_dir, state / HISTORY_FILE)
    key = str(root.resolve())
    with _OPEN_LOCK:
        cached = _OPEN.get(key)
        stamp = _stamp(root / "manifest.json")
        if cached is not None and cached[0] == stamp and cached[1].manifest.get("fingerprint") == wanted:
            return cached[1]
        ix = KnowledgeIndex(root)
        if ix.exists():
            try:
                ix.load()
            except AsapError:
                ix = KnowledgeIndex(root)
        if ix.manifest.get("fingerprint") != wanted or ix._reader is None and ix.manifest.get("documents"):
            ix.update(playbooks_dir=playbooks_dir, history=HistoryStore(state).load(), fingerprint=wanted)
        _OPEN[key] = (_stamp(root / "manifest.json"), ix)
        return ix


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)
