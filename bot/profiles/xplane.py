"""Raw XProf sessions (``plugins/profile/<session>/*.xplane.pb``) through the optional ``xprof`` package.

``xprof.convert.raw_to_tool_data.xspace_to_tool_data([paths], tool, params)`` turns the raw XSpace into
the same tool JSON a person would export from the XProf UI, which :mod:`bot.profiles.xprof_export` reads.
xprof caches its intermediate results next to the files it converts, so the session is linked into a
temporary folder first: a run folder (possibly checked into git) is never written to.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bot.errors import AsapError, ProfileError
from bot.profiles.io import MAX_PROFILE_BYTES, check_size
from bot.profiles.merge import merge_profiles
from bot.profiles.model import Profile
from bot.profiles.xprof_export import PARSERS

XPROF_TOOLS = ("hlo_stats", "roofline_model", "overview_page", "op_profile")
INSTALL_HINT = "install the xprof extra: pip install 'asap[xprof]' (or pip install xprof)"


def _converter() -> Any:
    try:
        module = importlib.import_module("xprof.convert.raw_to_tool_data")
    except ImportError:
        raise AsapError(
            "reading raw XProf sessions (*.xplane.pb) needs the optional 'xprof' package, which is not installed",
            hint=INSTALL_HINT,
        ) from None
    return module.xspace_to_tool_data


@contextlib.contextmanager
def _quiet_native_stderr() -> Iterator[None]:
    """xprof's C++ code logs every conversion step to fd 2; keep that out of the user's terminal."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def read_xplane(paths: list[Path], *, sources: list[str] | None = None, limit: int = MAX_PROFILE_BYTES) -> Profile:
    """Convert one session's ``*.xplane.pb`` files (one per host) and merge the tools into one Profile."""
    if not paths:
        raise ProfileError("no .xplane.pb files given")
    names = sources or [str(p) for p in paths]
    label = names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1} more)"
    for p, s in zip(paths, names, strict=True):
        check_size(p, limit, source=s)
    convert = _converter()
    parts: list[tuple[str, Profile]] = []
    warnings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="asap-xplane-") as tmp:
        session = Path(tmp) / "plugins" / "profile" / "session"
        session.mkdir(parents=True)
        linked = []
        for i, p in enumerate(paths):
            target = session / f"host{i}.xplane.pb"
            try:
                os.symlink(p.resolve(), target)
            except OSError:
                shutil.copyfile(p, target)
            linked.append(str(target))
        for tool in XPROF_TOOLS:
            try:
                with _quiet_native_stderr():
                    data, _ = convert(linked, tool, {"use_saved_result": False})
            except Exception as exc:  # noqa: BLE001 - xprof raises assorted errors for bad input
                warnings.append(f"{label}: xprof could not convert it to {tool}: {str(exc)[:200]}")
                continue
            if not data:
                warnings.append(f"{label}: xprof produced no {tool} data (not an XSpace protobuf, or empty)")
                continue
            if isinstance(data, str):
                data = data.encode("utf-8")
            try:
                part = PARSERS[tool](data, source=f"{label} [{tool}]")
            except ProfileError as exc:
                warnings.append(str(exc))
                continue
            parts.append((tool, part))
    if not parts:
        raise ProfileError(
            "xprof could not convert this session: " + "; ".join(w.split(": ", 1)[-1] for w in warnings[:2]),
            source=label,
        )
    merged = merge_profiles(parts)
    merged.sources = list(names)
    merged.warnings = warnings + merged.warnings
    return merged
