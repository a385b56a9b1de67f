"""mkdocs hook: the table of TensorRT's layer types is computed from the code at build time.

docs/layer-types.md holds a marker line; this hook replaces it with one row per member of TensorRT's
LayerType: the network method that adds it, whether the reference backend registers it (runs it), whether
the ONNX exporter lowers it, whether TensorRT-RTX 1.7's INetworkDefinition has that method, and the
trtbuild.layers builders whose source calls the method. The table cannot drift from the code;
tests/test_docs_site.py compares the built page with the registry.
"""

from __future__ import annotations

import ast
import html
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MARKER = "<!-- layer-table: generated from the reference's layer registry by docs/hooks/layer_table.py -->"

#: the TensorRT call that adds a layer of each type (TensorRT 11.4's names); boundary layers of loops,
#: conditionals and attention are added through their container's methods
ADDED_BY = {
    "CONVOLUTION": "add_convolution_nd", "CAST": "add_cast", "ACTIVATION": "add_activation",
    "POOLING": "add_pooling_nd", "LRN": "add_lrn", "SCALE": "add_scale_nd", "SOFTMAX": "add_softmax",
    "DECONVOLUTION": "add_deconvolution_nd", "CONCATENATION": "add_concatenation", "ELEMENTWISE": "add_elementwise",
    "PLUGIN": "add_plugin", "UNARY": "add_unary", "PADDING": "add_padding_nd", "SHUFFLE": "add_shuffle",
    "REDUCE": "add_reduce", "TOPK": "add_topk", "GATHER": "add_gather_v2", "MATRIX_MULTIPLY": "add_matrix_multiply",
    "RAGGED_SOFTMAX": "add_ragged_softmax", "CONSTANT": "add_constant", "IDENTITY": "add_identity",
    "PLUGIN_V2": "add_plugin_v2", "SLICE": "add_slice", "SHAPE": "add_shape", "PARAMETRIC_RELU": "add_parametric_relu",
    "RESIZE": "add_resize", "TRIP_LIMIT": "ILoop.add_trip_limit", "RECURRENCE": "ILoop.add_recurrence",
    "ITERATOR": "ILoop.add_iterator", "LOOP_OUTPUT": "ILoop.add_loop_output", "SELECT": "add_select",
    "FILL": "add_fill", "QUANTIZE": "add_quantize", "DEQUANTIZE": "add_dequantize",
    "CONDITION": "IIfConditional.set_condition", "CONDITIONAL_INPUT": "IIfConditional.add_input",
    "CONDITIONAL_OUTPUT": "IIfConditional.add_output", "SCATTER": "add_scatter", "EINSUM": "add_einsum",
    "ASSERTION": "add_assertion", "ONE_HOT": "add_one_hot", "NON_ZERO": "add_non_zero",
    "GRID_SAMPLE": "add_grid_sample", "NMS": "add_nms", "REVERSE_SEQUENCE": "add_reverse_sequence",
    "NORMALIZATION": "add_normalization", "PLUGIN_V3": "add_plugin_v3", "SQUEEZE": "add_squeeze",
    "UNSQUEEZE": "add_unsqueeze", "CUMULATIVE": "add_cumulative", "DYNAMIC_QUANTIZE": "add_dynamic_quantize",
    "ATTENTION_INPUT": "add_attention", "ATTENTION_OUTPUT": "add_attention",
    "ROTARY_EMBEDDING": "add_rotary_embedding", "KV_CACHE_UPDATE": "add_kv_cache_update", "MOE": "add_moe",
    "DIST_COLLECTIVE": "add_dist_collective",
}

#: a builder calls these aliases of the same layer type too
ALSO_ADDED_BY = {"GATHER": ("add_gather",), "SCALE": ("add_scale",), "NORMALIZATION": ("add_normalization_v2",),
                 "DYNAMIC_QUANTIZE": ("add_dynamic_quantize_v2",), "ATTENTION_INPUT": ("add_attention_v2",),
                 "ATTENTION_OUTPUT": ("add_attention_v2",)}


@dataclass(frozen=True)
class Row:
    layer_type: str
    added_by: str
    reference: bool
    onnx: bool
    rtx: bool | None  # None: TensorRT-RTX is not installed where the docs were built
    builders: tuple[str, ...]


def builder_calls() -> dict[str, set[str]]:
    """{TensorRT method name: {public trtbuild.layers functions that call it}}, read from the source: a
    builder's own calls and those of its module's private helpers (not those of other builders it composes,
    which get their own rows)."""
    calls: dict[str, set[str]] = {}
    for path in sorted((ROOT / "trtbuild" / "layers").glob("*.py")):
        direct: dict[str, set[str]] = {}  # function -> the names it calls (attributes and plain names)
        for fn in ast.parse(path.read_text()).body:
            if isinstance(fn, ast.FunctionDef):
                direct[fn.name] = {node.func.attr if isinstance(node.func, ast.Attribute) else
                                   getattr(node.func, "id", "") for node in ast.walk(fn) if isinstance(node, ast.Call)}
        for name in (n for n in direct if not n.startswith("_")):
            seen, todo = set(), [name]
            while todo:
                current = todo.pop()
                if current not in seen:
                    seen.add(current)
                    todo += [c for c in direct.get(current, ()) if c.startswith("_") and c in direct]
            for called in set().union(*(direct[f] for f in seen)):
                calls.setdefault(called, set()).add(f"{path.stem}.{name}")
    return calls


def _rtx_network_class():
    try:
        import tensorrt_rtx
    except ImportError:
        return None
    return tensorrt_rtx.INetworkDefinition


def rows() -> list[Row]:
    sys.path.insert(0, str(ROOT))
    from trtbuild.onnx_export import lower  # noqa: F401 - registers the lowerings
    from trtbuild.reference.enums import LayerType
    from trtbuild.reference.ops import op_for

    rtx = _rtx_network_class()
    calls = builder_calls()
    out = []
    for ltype in sorted(LayerType, key=lambda t: t.name):
        method = ADDED_BY[ltype.name]
        op = op_for(ltype)
        names = (method.rpartition(".")[2], *ALSO_ADDED_BY.get(ltype.name, ()))
        builders = sorted(set().union(*(calls.get(n, set()) for n in names)))
        top = method.split(".")[0]
        has_rtx = None if rtx is None else (hasattr(rtx, top) if "." not in method else hasattr(rtx, "add_loop")
                                            if top == "ILoop" else hasattr(rtx, "add_if_conditional"))
        out.append(Row(ltype.name, method, op is not None, op is not None and op.lower is not None, has_rtx,
                       tuple(builders)))
    return out


def _mark(value) -> str:
    return "n/a" if value is None else ("✓" if value else "—")


def render() -> str:
    table = rows()
    lines = ["| Layer type | Added by | Reference | ONNX | TensorRT-RTX | Builders that use it |",
             "|---|---|:-:|:-:|:-:|---|"]
    for r in table:
        builders = ", ".join(f"`{b}`" for b in r.builders) or ""
        lines.append(f"| `{r.layer_type}` | `{html.escape(r.added_by)}` | {_mark(r.reference)} | {_mark(r.onnx)} | "
                     f"{_mark(r.rtx)} | {builders} |")
    done = sum(r.reference for r in table)
    lines.append("")
    lines.append(f"The reference runs {done} of TensorRT's {len(table)} layer types.")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files):  # mkdocs hook signature
    if MARKER in markdown:
        return markdown.replace(MARKER, render())
    return markdown
