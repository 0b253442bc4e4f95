"""Round-trip editing of sharding configs: change only the mesh values, keep every other byte.

Public API::

    apply_mesh(config: ShardingConfig, mesh: Mesh) -> str
    diff_text(old: str, new: str, path: str) -> str

``apply_mesh`` never re-dumps YAML. It locates each value's exact character span in the original text
(``yaml.compose`` marks) and splices the new number in, keeping quotes; a key that must be added
becomes one new line after the last existing parallelism key, at its indentation and with the file's
line ending (or ``, key: v`` inside a flow mapping). Comments, key order, quoting, indentation, blank
lines, trailing whitespace and CRLF endings of every other line stay byte-identical. Before returning,
the new text is parsed again and must resolve to the requested mesh, so an edit that would not mean
what was asked is refused instead of written.
"""

from __future__ import annotations

import difflib

from bot.configs import maxtext, megatron, plainmesh
from bot.configs.common import apply_splices
from bot.configs.detect import parse_config
from bot.configs.mesh import Mesh
from bot.configs.sharding import ShardingConfig
from bot.configs.yamlscan import compose
from bot.errors import ConfigError

_PLANNERS = {"maxtext": maxtext.plan, "ici_mesh": plainmesh.plan, "megatron": megatron.plan}


def apply_mesh(config: ShardingConfig, mesh: Mesh) -> str:
    """The config's text rewritten so it describes ``mesh`` on ``mesh.num_devices`` chips.

    MaxText and plain-mesh files get the mesh's ICI and DCN sizes; Megatron files get its total
    tensor/pipeline/context/expert sizes (data parallelism stays implicit; node placement follows
    Megatron's rank order). Raises :class:`ConfigError` when the mesh has a non-positive axis or an
    axis the format cannot express (FSDP for Megatron).
    """
    for where, axes in (("ici", mesh.ici), ("dcn", mesh.dcn)):
        for axis, size in axes.items():
            if isinstance(size, bool) or size < 1:
                raise ConfigError(f"axis size must be a positive integer, got {size}", source=config.source,
                                  field=f"mesh.{where}.{axis}")
    root = compose(config.text, config.source)
    splices = _PLANNERS[config.format](config, root, mesh)
    new_text = apply_splices(config.text, splices)
    _verify(config, new_text, mesh)
    return new_text


def _verify(config: ShardingConfig, new_text: str, mesh: Mesh) -> None:
    """Parse the edited text again; it must give exactly the requested mesh."""
    got = parse_config(new_text, config.source).mesh(mesh.num_devices, mesh.num_slices)
    if config.format == "megatron":
        ok = got.sizes() == mesh.sizes()
    else:
        ok = got == mesh.normalized()
    if not ok:
        raise ConfigError(
            f"internal error: the edited file resolves to {got.short()}, not the requested {mesh.normalized().short()}",
            source=config.source,
            field="mesh",
        )


def diff_text(old: str, new: str, path: str) -> str:
    """A unified diff (``a/path`` -> ``b/path``, 3 lines of context), empty when nothing changed.

    A last line without a newline is marked ``\\ No newline at end of file`` as git does.
    """
    if old == new:
        return ""

    def lines(text: str) -> list[str]:
        out = text.split("\n")
        out = [line + "\n" for line in out[:-1]] + ([out[-1]] if out[-1] else [])
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n\\ No newline at end of file\n"
        return out

    return "".join(difflib.unified_diff(lines(old), lines(new), fromfile=f"a/{path}", tofile=f"b/{path}"))
