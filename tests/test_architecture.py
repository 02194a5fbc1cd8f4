"""The layout the code promises: import layers that flow one way, no cycles, no private names taken
across modules, folders small enough to read.

The import graph is read from the source (every ``import``, at module level or inside a function),
so a new module or import is checked without being listed here.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gbfs", "runners")

#: the library's layers, lowest first: a module imports only from its own layer or lower ones
LIBRARY_LAYERS = (
    ("gbfs.booster",),
    ("gbfs.validation", "gbfs.criteria", "gbfs.data"),
    ("gbfs.sampling", "gbfs.io"),
    ("gbfs.estimators",),
    ("gbfs.baselines", "gbfs.selection", "gbfs.dask"),
    ("gbfs", "gbfs._threading"),
)
#: the harness's layers, lowest first: MLflow plumbing, what every runner does, tuning, the papers
#: and the benchmarks, and on top the commands (``runners.<name>``)
HARNESS_LAYERS = (
    ("runners.tracking",),
    ("runners.core",),
    ("runners.tuning",),
    ("runners.paper", "runners.bench"),
    ("runners",),
)
MAX_ENTRIES = 12  # modules and subpackages of one folder
#: the harness's top folder is its command line: one module per ``python -m runners.<name>``, which the
#: count leaves out, next to the wings the commands stand on
COMMANDS_FOLDER = ROOT / "runners"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every import of a project module in ``path``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [a.name for a in node.names]
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
            out += [(m, []) for m in submodules]
            if len(submodules) < len(names):
                out.append((target, [n for n in names if f"{target}.{n}" not in MODULES]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return [(m, n) for m, n in out if m.split(".")[0] in PACKAGES and m in MODULES]


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(module: str) -> int:
    layers = LIBRARY_LAYERS if module.split(".")[0] == "gbfs" else HARNESS_LAYERS
    best, rank = -1, None
    for i, layer in enumerate(layers):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    assert rank is not None, f"{module} belongs to no layer"
    return rank


def test_the_graph_is_read():
    """The checks below see the imports they are about (a reader that saw none would pass them)."""
    assert ("gbfs.booster.tree", ["PackedEnsemble"]) in GRAPH["gbfs.estimators.single_task"]
    assert any(m == "gbfs.booster.kernels.portable" for m, _ in GRAPH["gbfs.sampling.samplers"])


def test_no_import_cycles():
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep, _ in GRAPH[node]:
            # a package imports its own submodules to re-export them: not a cycle back into it
            if state.get(dep) == 1 and not node.startswith(dep + "."):
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_private_name_is_imported_from_another_module():
    taken = [f"{name} takes {n} from {dep}" for name, deps in GRAPH.items() for dep, names in deps
             for n in names if n.startswith("_") and not n.startswith("__")]
    assert not taken, "\n".join(taken)


def test_the_library_never_imports_the_harness():
    wrong = [f"{name} -> {dep}" for name, deps in GRAPH.items() if name.startswith("gbfs")
             for dep, _ in deps if dep.startswith("runners")]
    assert not wrong, "\n".join(wrong)


def test_layers_import_downwards():
    upward = [f"{name} (layer {_layer(name)}) -> {dep} (layer {_layer(dep)})"
              for name, deps in GRAPH.items() for dep, _ in deps
              if dep.split(".")[0] == name.split(".")[0] and _layer(dep) > _layer(name)]
    assert not upward, "\n".join(upward)


def _is_command(path: Path) -> bool:
    """A thin command module: it runs as ``__main__`` and holds at most a few dozen lines."""
    text = path.read_text()
    return 'if __name__ == "__main__":' in text and len(text.splitlines()) <= 60


@pytest.mark.parametrize("folder", sorted({p.parent for p in MODULES.values()}),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_folders_stay_small(folder):
    entries = [p for p in folder.iterdir()
               if (p.suffix == ".py" and p.name not in ("__init__.py", "__main__.py"))
               or (p / "__init__.py").is_file()]
    if folder == COMMANDS_FOLDER:
        entries = [p for p in entries if p.is_dir() or not _is_command(p)]
    assert len(entries) <= MAX_ENTRIES, f"{folder.relative_to(ROOT)}: {len(entries)} modules and packages"


def _private_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """``name._attr = ...`` on another object than ``self``, outside a classmethod that builds its own
    class's instance (``est = cls()``)."""
    found = []

    def visit(node: ast.AST, in_classmethod: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_classmethod
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside = any(isinstance(d, ast.Name) and d.id == "classmethod" for d in child.decorator_list)
            if isinstance(child, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                for t in targets:
                    for sub in ast.walk(t):
                        if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                                and sub.value.id not in ("self", "cls") and sub.attr.startswith("_")
                                and not sub.attr.startswith("__") and not inside):
                            found.append((child.lineno, f"{sub.value.id}.{sub.attr}"))
            visit(child, inside)

    visit(tree, False)
    return found


def test_no_module_writes_another_objects_private_state():
    """The estimators install what the engine returns (a fit, a model file's ensemble); no helper
    module writes their private attributes."""
    writes = [f"{name}:{line} writes {what}" for name, path in MODULES.items() if name.startswith("gbfs")
              for line, what in _private_writes(ast.parse(path.read_text()))]
    assert not writes, "\n".join(writes)


def _layout_entries() -> set[str]:
    """The modules the documentation's architecture page lists, as paths (``gbfs/booster/tree.py``): the page
    is generated from the source tree by ``docs/_ext/gbfs_layout.py`` when the documentation is built."""
    spec = importlib.util.spec_from_file_location("gbfs_layout", ROOT / "docs" / "_ext" / "gbfs_layout.py")
    layout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layout)
    return layout.listed_modules(ROOT)


def test_the_architecture_page_lists_every_module():
    modules = {p.relative_to(ROOT).as_posix() for p in MODULES.values()}
    listed = _layout_entries()
    # a package's __init__ is its folder's line, except at the top of gbfs/ and runners/
    wanted = {m for m in modules if not m.endswith("/__init__.py") or m.count("/") == 1}
    assert wanted <= listed, f"not on the architecture page: {sorted(wanted - listed)}"
    assert listed <= modules, f"listed but gone: {sorted(listed - modules)}"
