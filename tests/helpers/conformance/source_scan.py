"""Scan trtbuild's own source (with ast, not grep) for TensorRT APIs that TensorRT 11 removed,
and for network/builder flags written as numbers instead of names.

The removed set comes from two API dumps (dump_api.py): classes that 10 has and 11 lacks, and
members that a class lost. Static analysis cannot know the type of `layer` in `layer.foo`, so:
- a removed class name is flagged wherever it appears (name, attribute, import, string in getattr);
- a removed member is flagged when qualified by its class (`trt.BuilderFlag.FP16`, `BuilderFlag.INT8`);
- a member name that no TensorRT 11 class or module has at all (`set_output_type`,
  `platform_has_fast_fp16`, `EXPLICIT_BATCH`, ...) is flagged on any object, except the generic
  words in GENERIC_NAMES, which are flagged only in the forms that touch TensorRT (see there).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

#: Removed names that are also ordinary Python words. `precision` is flagged only when assigned
#: (`layer.precision = trt.float16`) or set with setattr, since `args.precision` is a CLI option;
#: `FP16` only when qualified by the enum that lost it (`trt.BuilderFlag.FP16`).
GENERIC_NAMES = frozenset({"precision", "FP16"})

#: APIs TensorRT removed before 10.16 (absent from both dumps; the test checks that), which
#: older tutorials and tensorrtx-style code still use.
REMOVED_BEFORE_10 = frozenset({
    "build_engine", "execute_async_v2", "add_convolution", "add_deconvolution", "add_pooling",
    "add_fully_connected", "add_padding", "max_batch_size", "max_workspace_size", "num_bindings",
    "binding_is_input", "get_binding_index", "get_binding_name", "get_binding_shape", "get_binding_dtype",
    "set_binding_shape", "get_max_batch_size", "EXPLICIT_PRECISION",
})
#: Any attribute starting with these is a removed binding-index API.
REMOVED_PREFIXES = ("get_binding_", "set_binding_")


@dataclass
class RemovedApi:
    classes: set[str] = field(default_factory=set)
    members: dict[str, set[str]] = field(default_factory=dict)  # class -> removed members
    anywhere: set[str] = field(default_factory=set)  # names no class or module of the new version has


def removed_between(old: dict, new: dict) -> RemovedApi:
    """What `new` (a dump) removed compared with `old`."""
    new_names = set(new["classes"]) | set(new["functions"]) | set(new["values"])
    for entry in new["classes"].values():
        new_names |= set(entry["members"])
    out = RemovedApi()
    for name, entry in old["classes"].items():
        if name not in new["classes"]:
            if "." not in name:
                out.classes.add(name)
            continue
        gone = set(entry["members"]) - set(new["classes"][name]["members"])
        if gone:
            out.members[name.split(".")[-1]] = out.members.get(name.split(".")[-1], set()) | gone
            out.anywhere |= {m for m in gone if m not in new_names}
    return out


@dataclass
class Finding:
    path: str
    line: int
    code: str
    why: str
    kind: str = "removed"  # "removed" (an API TensorRT removed) or "flag-number" (a flag given by number)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.code}  -- {self.why}"


def _qualifier(node: ast.expr) -> str | None:
    """The last name of `a.b.C` or `C`."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _is_constant_expr(node: ast.expr) -> bool:
    """True for expressions made only of literals (1, 1 << 1, 2 | 1, ...)."""
    return all(not isinstance(n, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) for n in ast.walk(node))


class _Visitor(ast.NodeVisitor):
    def __init__(self, removed: RemovedApi, path: str, source: str):
        self.removed, self.path, self.source = removed, path, source
        self.findings: list[Finding] = []

    def _flag(self, node, why, kind="removed"):
        code = ast.get_source_segment(self.source, node) or ""
        self.findings.append(Finding(self.path, node.lineno, code.splitlines()[0] if code else "", why, kind))

    def _removed_member(self, owner: str | None, name: str, store: bool) -> str | None:
        r = self.removed
        if name in r.classes:
            return f"class {name} was removed in TensorRT 11"
        if owner is not None and name in r.members.get(owner, ()):
            return f"{owner}.{name} was removed in TensorRT 11"
        if name in REMOVED_BEFORE_10 or name.startswith(REMOVED_PREFIXES):
            return f"{name} was removed before TensorRT 10.16 (deprecated in 8.x/10.0)"
        if name in r.anywhere and (name not in GENERIC_NAMES or (name == "precision" and store)):
            return f"{name} was removed in TensorRT 11 (no TensorRT 11 class has it)"
        return None

    def visit_Attribute(self, node: ast.Attribute):
        why = self._removed_member(_qualifier(node.value), node.attr, isinstance(node.ctx, (ast.Store, ast.Del)))
        if why:
            self._flag(node, why)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name):
        if node.id in self.removed.classes:
            self._flag(node, f"class {node.id} was removed in TensorRT 11")

    def visit_ImportFrom(self, node: ast.ImportFrom):
        for alias in node.names:
            if alias.name in self.removed.classes:
                self._flag(node, f"class {alias.name} was removed in TensorRT 11")

    def visit_Call(self, node: ast.Call):
        func = node.func
        fname = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if fname in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            why = self._removed_member(_qualifier(node.args[0]), node.args[1].value, fname == "setattr")
            if why:
                self._flag(node, why)
        if fname == "create_network":
            args = list(node.args) + [k.value for k in node.keywords]
            if not args or any(_is_constant_expr(a) for a in args):
                self._flag(node, "create_network flags must name the flag: 1 << int(trt.NetworkDefinitionCreationFlag."
                                 "STRONGLY_TYPED) (its number is 1 in 10, 0 in 11)",
                           "flag-number")
        if fname in ("NetworkDefinitionCreationFlag", "BuilderFlag", "set_flag", "clear_flag", "get_flag") \
                and node.args and _is_constant_expr(node.args[0]):
            self._flag(node, f"{fname}({ast.get_source_segment(self.source, node.args[0])}): refer to flags by name; "
                             "TensorRT 11 renumbered them", "flag-number")
        self.generic_visit(node)


def scan_source(source: str, path: str, removed: RemovedApi) -> list[Finding]:
    """Findings in one Python source text."""
    visitor = _Visitor(removed, path, source)
    visitor.visit(ast.parse(source, filename=path))
    return visitor.findings


def scan_tree(root: Path, removed: RemovedApi) -> list[Finding]:
    """Findings in every .py file under `root` (sorted by path)."""
    findings = []
    for path in sorted(Path(root).rglob("*.py")):
        findings += scan_source(path.read_text(encoding="utf-8"), str(path), removed)
    return findings


# -- names trtbuild's code uses (for the per-module checks: TensorRT 10/11 and TensorRT-RTX) ----
#: Variable names under which trtbuild's code holds a TensorRT module (`trt = trt_of(network)`,
#: `rtx = load_trt("tensorrt-rtx")`).
MODULE_NAMES = ("trt", "tensorrt", "rtx", "tensorrt_rtx")


@dataclass(frozen=True)
class Use:
    path: str  # relative to the package's parent ("trtbuild/engine/rtx.py")
    line: int
    store: bool  # assigned (`layer.precision = ...`) or set with setattr
    owner: str | None = None  # `x` in `x.name` / getattr(x, "name") when x is a plain name

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def trt_attribute_chains(tree: ast.AST, names=("trt", "tensorrt")):
    """(first, second-or-None, line) for every `trt.X` / `trt.X.Y` (module held as one of `names`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
            yield node.attr, None, node.lineno
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name) and node.value.value.id in names):
            yield node.value.attr, node.attr, node.lineno


def _package_files(root: Path, skip=("reference",)):
    """(relative path, source, tree) of every .py under `root`, outside the top-level packages `skip`."""
    root = Path(root)
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in skip:
            continue
        source = path.read_text(encoding="utf-8")
        yield str(path.relative_to(root.parent)), source, ast.parse(source, filename=str(path))


def attribute_uses(root: Path, skip=("reference",)) -> dict[str, list[Use]]:
    """Every public attribute name trtbuild's code reads or writes (`x.name`, and the string in
    getattr/setattr/hasattr(x, "name")), with where, outside the top-level packages `skip` (the
    reference backend, whose own surface the conformance tests compare directly)."""
    uses: dict[str, list[Use]] = {}
    for rel, _, tree in _package_files(root, skip):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                name, store, obj = node.attr, isinstance(node.ctx, (ast.Store, ast.Del)), node.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
                name, store, obj = node.args[1].value, node.func.id == "setattr", node.args[0]
            else:
                continue
            if not name.startswith("_"):
                owner = obj.id if isinstance(obj, ast.Name) else None
                uses.setdefault(name, []).append(Use(rel, node.lineno, store, owner))
    return uses


def module_chain_uses(root: Path, names=MODULE_NAMES, skip=("reference",)) -> dict[tuple, list[Use]]:
    """{(X, Y-or-None): [uses]} of every `trt.X` / `trt.X.Y` in trtbuild's code outside `skip`."""
    out: dict[tuple, list[Use]] = {}
    for rel, _, tree in _package_files(root, skip):
        for first, second, line in trt_attribute_chains(tree, names):
            if first.startswith("_") or first in ("__version__", "__name__"):
                continue
            key = (first, second if second is not None and not second.startswith("_") else None)
            out.setdefault(key, []).append(Use(rel, line, False))
    return out


def guard_before(root: Path, use: Use, markers: tuple[str, ...]) -> str | None:
    """The source of the `if` statement that guards `use`: in the function (or class body)
    enclosing the use, an earlier `if` whose condition mentions one of `markers` (e.g. "is_rtx(")
    and whose body raises. None if there is none."""
    path = Path(root).parent / use.path
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
              and n.lineno <= use.line <= (n.end_lineno or n.lineno)]
    for scope in sorted(scopes, key=lambda n: -n.lineno):  # innermost first
        for node in ast.walk(scope):
            if (isinstance(node, ast.If) and node.lineno < use.line
                    and any(m in (ast.get_source_segment(source, node.test) or "") for m in markers)
                    and any(isinstance(s, ast.Raise) for s in node.body)):
                return (ast.get_source_segment(source, node.test) or "").strip()
    return None
