"""The architecture page's module list, generated from the modules' docstrings at build time.

Every module of ``gbfs/`` and ``runners/`` is listed by package with its docstring's first sentence, so
the list cannot go stale: a new module appears on the next build. ``layout_markdown`` is what the page
includes; ``listed_modules`` is what ``tests/test_docs.py`` checks against the source tree.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gbfs", "runners")
INTRO = {
    "gbfs": "the library (imports no harness module); layers, lowest first: `booster` → `validation`, "
            "`criteria`, `data` → `sampling`, `io` → `estimators` → `baselines`, `selection`",
    "runners": "the harness; the top holds the commands (`python -m runners.<name>`), the wings hold what "
               "they share; layers, lowest first: `tracking` → `core` → `tuning` → `paper`, `bench` → "
               "the commands",
}


def first_sentence(path: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    doc = " ".join(doc.split("\n\n")[0].split())
    m = re.match(r"(.+?\.)(\s|$)", doc)
    text = m.group(1) if m else doc
    # roles and double backquotes become plain Markdown code
    return re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text).replace("``", "`")


def _packages(top: str, root: Path) -> list[Path]:
    return sorted({p.parent for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts})


def layout_entries(root: Path = ROOT) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """``(folder, folder's docstring, [(module file, docstring)])`` for every package, in order."""
    out = []
    for top in PACKAGES:
        for pkg in _packages(top, root):
            rel = pkg.relative_to(root).as_posix()
            init = pkg / "__init__.py"
            head = first_sentence(init) if init.exists() and rel not in PACKAGES else ""
            mods = [(m.name, first_sentence(m)) for m in sorted(pkg.glob("*.py"))
                    if not (m.name == "__init__.py" and rel not in PACKAGES)]
            out.append((rel, head, mods))
    return out


def listed_modules(root: Path = ROOT) -> set[str]:
    """The module paths the page lists (``gbfs/booster/tree.py``); a package's ``__init__`` is its folder's
    line, except at the top of ``gbfs/`` and ``runners/``."""
    return {f"{folder}/{name}" for folder, _, mods in layout_entries(root) for name, _ in mods}


def layout_markdown(root: Path = ROOT) -> str:
    """The module list as Markdown."""
    lines: list[str] = []
    entries = layout_entries(root)
    for top in PACKAGES:
        lines += [f"### `{top}/`", "", f"{INTRO[top][0].upper()}{INTRO[top][1:]}.", ""]
        for folder, head, mods in entries:
            if folder != top and not folder.startswith(top + "/"):
                continue
            lines.append(f"* **`{folder}/`**" + (f" — {head}" if head else ""))
            for name, doc in mods:
                lines.append(f"  * `{name}` — {doc}")
        lines.append("")
    return "\n".join(lines)


def _write(app) -> None:
    out = Path(app.srcdir) / "_generated" / "layout.md"
    out.parent.mkdir(exist_ok=True)
    text = layout_markdown()
    if not out.exists() or out.read_text() != text:
        out.write_text(text)


def setup(app):
    app.connect("builder-inited", _write)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
