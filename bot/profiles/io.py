"""Guarded reading of profile files: size limits, gzip, and JSON with positioned errors.

Profiles come from users and from other tools, so every reader goes through these helpers: a file larger
than the limit is refused before it is read (a 2 GB export would otherwise exhaust memory), gzip data is
decompressed in bounded chunks (a small ``.gz`` cannot expand past the limit), and malformed JSON is
reported with its line and column instead of a parser traceback.
"""

from __future__ import annotations

import gzip
import mmap
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from bot.errors import ProfileError

MAX_PROFILE_BYTES = 1 << 30  # 1 GiB: larger exports are refused, compressed or not
MAX_GZIP_RATIO = 100  # profiles compress 5-20x; past this (and RATIO_FREE_BYTES) the .gz is refused as a bomb
RATIO_FREE_BYTES = 64 << 20  # decompressed bytes allowed whatever the ratio
_CHUNK = 1 << 20


def check_gzip_ratio(decompressed: int, compressed: int, *, source: str) -> None:
    """Refuse gzip data that expands past :data:`MAX_GZIP_RATIO` once it is bigger than :data:`RATIO_FREE_BYTES`.

    A gzip bomb (1 MB of zeros or one repeated event expanding to ~1 GB) would otherwise cost a minute of
    decompression and parsing; real JSON/trace profiles compress 5-20x, so stopping here costs at most
    ``RATIO_FREE_BYTES`` of work.
    """
    if decompressed > RATIO_FREE_BYTES and decompressed > MAX_GZIP_RATIO * max(compressed, 1):
        raise ProfileError(
            f"gzip data expands more than {MAX_GZIP_RATIO}x ({human_bytes(compressed)} read, over "
            f"{human_bytes(decompressed)} out): refused as a likely gzip bomb",
            source=source,
            hint="profiles compress 5-20x; re-export the file, or decompress it yourself if it is genuine",
        )


def human_bytes(n: float) -> str:
    """Bytes as a short human figure, e.g. ``1.0 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def check_size(path: Path, limit: int = MAX_PROFILE_BYTES, *, source: str | None = None) -> int:
    """Size of ``path`` in bytes; :class:`ProfileError` when it is missing, not a file, or over ``limit``."""
    src = source or str(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ProfileError("profile file does not exist", source=src) from None
    except OSError as exc:
        raise ProfileError(f"cannot read profile file: {exc.strerror}", source=src) from None
    if not path.is_file():
        raise ProfileError("expected a profile file, found a folder or special file", source=src)
    if st.st_size > limit:
        raise ProfileError(
            f"file is {human_bytes(st.st_size)}; the limit for one profile file is {human_bytes(limit)}",
            source=src,
            hint="export a shorter profiling window, or only the tools ASAP reads (hlo_stats, overview_page)",
        )
    return st.st_size


def is_gzip(path: Path) -> bool:
    """True for ``.gz`` names (the content is then checked by the decompressor)."""
    return path.name.endswith(".gz")


def read_bytes(path: Path, limit: int = MAX_PROFILE_BYTES, *, source: str | None = None) -> bytes:
    """The file's bytes (decompressed when it is ``.gz``), never more than ``limit`` of them."""
    src = source or str(path)
    check_size(path, limit, source=src)
    try:
        if not is_gzip(path):
            return path.read_bytes()
        out = bytearray()
        with gzip.open(path, "rb") as fh:
            while True:
                chunk = fh.read(_CHUNK)
                if not chunk:
                    break
                out += chunk
                if len(out) > limit:
                    raise ProfileError(
                        f"decompresses to more than {human_bytes(limit)}, the limit for one profile file", source=src
                    )
                check_gzip_ratio(len(out), fh.fileobj.tell() if fh.fileobj else 0, source=src)
        return bytes(out)
    except ProfileError:
        raise
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise ProfileError(f"corrupt or truncated gzip data ({exc})", source=src) from None
    except OSError as exc:
        raise ProfileError(f"cannot read profile file: {exc.strerror or exc}", source=src) from None


MMAP_BYTES = 64 << 20
"""Plain (not gzip) files larger than this are read through an mmap whose pages are released as they are parsed."""


@contextmanager
def open_mapped(path: Path, limit: int = MAX_PROFILE_BYTES, *, source: str | None = None) -> Iterator[mmap.mmap | None]:
    """An mmap of a large plain profile file (``None`` for small or gzip files: read those with :func:`read_bytes`)."""
    src = source or str(path)
    size = check_size(path, limit, source=src)
    if is_gzip(path) or size <= MMAP_BYTES:
        yield None
        return
    try:
        with path.open("rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise ProfileError(f"cannot read profile file: {getattr(exc, 'strerror', None) or exc}", source=src) from None
    try:
        yield mapped
    finally:
        mapped.close()


def loads_json(data: bytes | str, *, source: str) -> Any:
    """Parse JSON with orjson; malformed input raises :class:`ProfileError` naming line, column and offset."""
    try:
        return orjson.loads(data if isinstance(data, bytes | str) else memoryview(data))
    except orjson.JSONDecodeError as exc:
        raise ProfileError(
            f"malformed JSON at line {exc.lineno}, column {exc.colno} (char {exc.pos}): {exc.msg}", source=source
        ) from None


def decode_text(data: bytes, *, source: str) -> str:
    """UTF-8 text, or :class:`ProfileError` naming the byte offset of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError(f"not UTF-8 text (bad byte at offset {exc.start})", source=source) from None


def json_value_end(data: bytes, start: int) -> int:
    """Index just past the JSON object or array starting at ``start`` (skips strings), or -1 if unclosed.

    Lets the streaming readers cut one value out of a large buffer without parsing the whole file.
    """
    depth, in_str, i, n = 0, False, start, len(data)
    while i < n:
        ch = data[i]
        if in_str:
            if ch == 0x5C:  # backslash: skip the escaped byte
                i += 2
                continue
            if ch == 0x22:
                in_str = False
        elif ch == 0x22:
            in_str = True
        elif ch in (0x5B, 0x7B):
            depth += 1
        elif ch in (0x5D, 0x7D):
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1
