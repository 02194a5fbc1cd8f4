"""The documentation's sources, checked without building them: every public name has an API entry,
the architecture page is the generated module list, the gallery's scripts are all executed, and the
README stays short. CI builds the site itself (``.ci/run``: ``sphinx-build -W``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API = DOCS / "api.rst"

#: modules besides the packages' ``__init__`` whose ``__all__`` the API reference documents in full
DOCUMENTED_MODULES = ("gbfs/data/synthetic/generators.py", "gbfs/selection/stability.py",
                      "gbfs/selection/feature_utility.py")


def _all_names(path: Path) -> list[str]:
    """The names of a module's ``__all__`` (read from its source; nothing imported)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _public_modules() -> list[Path]:
    """``gbfs/__init__.py``, every public subpackage's ``__init__.py`` with an ``__all__``, and the
    documented modules."""
    inits = [ROOT / "gbfs" / "__init__.py"] + sorted(
        p for p in (ROOT / "gbfs").glob("*/__init__.py") if not p.parent.name.startswith("_"))
    return [p for p in inits + [ROOT / m for m in DOCUMENTED_MODULES] if _all_names(p)]


def _api_entries() -> dict[str, set[str]]:
    """The names the API page documents, by the module they are documented under: the entries of
    its ``autosummary`` tables and its ``auto*`` directives, each under the latest ``currentmodule``."""
    entries: dict[str, set[str]] = {}
    module, in_table = None, False
    for line in API.read_text().splitlines():
        if m := re.match(r"\.\. currentmodule:: ([\w.]+)", line):
            module = m.group(1)
        elif line.startswith(".. autosummary::"):
            in_table = True
        elif m := re.match(r"\.\. auto(?:data|class|function|exception):: (\w+)$", line):
            entries.setdefault(module, set()).add(m.group(1))
        elif in_table and (m := re.match(r" {3}(\w+)$", line)):
            entries.setdefault(module, set()).add(m.group(1))
        elif in_table and line and not line.startswith(" "):
            in_table = False
    return entries


@pytest.mark.parametrize("path", _public_modules(), ids=lambda p: _module_name(p))
def test_every_public_name_has_an_api_page(path):
    module = _module_name(path)
    entries = _api_entries()
    # a name ``gbfs`` re-exports is documented once, under ``gbfs``
    documented = entries.get(module, set()) | (set(_all_names(ROOT / "gbfs" / "__init__.py"))
                                               & entries.get("gbfs", set()))
    text = API.read_text()
    missing = [n for n in _all_names(path)
               if n not in documented and not (n.startswith("__") and f"{module}.{n}" in text)]
    assert not missing, f"{module}.__all__ names missing from docs/api.rst: {missing}"


def test_the_public_modules_include_the_package_and_its_data_layer():
    assert {_module_name(p) for p in _public_modules()} >= {"gbfs", "gbfs.data"}


def test_the_api_page_documents_nothing_that_is_gone():
    """An entry whose name left its module would fail the build; this says which one, fast."""
    for module, names in _api_entries().items():
        path = ROOT / Path(*module.split("."))
        source = (path / "__init__.py") if path.is_dir() else path.with_suffix(".py")
        text = source.read_text()
        gone = [n for n in names if not re.search(rf"\b{n}\b", text)]
        assert not gone, f"docs/api.rst documents {module}.{gone}, which {source.name} does not define"


def test_the_architecture_page_is_the_generated_module_list():
    page = (DOCS / "architecture.md").read_text()
    assert "```{include} _generated/layout.md" in page
    conf = (DOCS / "conf.py").read_text()
    assert '"gbfs_layout"' in conf


def test_every_gallery_script_is_executed():
    """sphinx-gallery executes the scripts matching ``filename_pattern``: every example must match it
    and open with a docstring whose first line is its title."""
    conf = (DOCS / "conf.py").read_text()
    pattern = re.search(r'"filename_pattern": r"([^"]+)"', conf).group(1)
    scripts = sorted((ROOT / "examples").glob("*.py"))
    assert len(scripts) >= 4
    for script in scripts:
        assert re.search(pattern, "/" + script.name), f"{script.name} would not be executed"
        doc = ast.get_docstring(ast.parse(script.read_text()))
        assert doc and doc.splitlines()[0].strip() and set(doc.splitlines()[1].strip()) == {"="}, script.name


def test_every_page_is_in_a_toctree():
    """Sphinx warns about a page no toctree reaches; this names it without a build."""
    pages = {p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*")
             if p.suffix in (".md", ".rst")
             and not p.relative_to(DOCS).parts[0].startswith(("_", "auto_examples", "generated"))
             and p.name != "sg_execution_times.rst"}
    listed = {"index"}
    for page in pages:
        text = (DOCS / page).with_suffix(".md" if (DOCS / f"{page}.md").exists() else ".rst").read_text()
        for block in re.findall(r"```\{toctree\}\n(.*?)```", text, re.S):
            folder = str(Path(page).parent)
            for line in block.splitlines():
                if line and not line.startswith(":"):
                    listed.add(line.strip() if folder == "." else f"{folder}/{line.strip()}")
    assert pages <= listed, f"not in any toctree: {sorted(pages - listed)}"


def test_the_readme_is_short_and_has_no_status_list():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 260
    assert not re.search(r"^#+ Status\b", readme, re.M)
    for page in DOCS.rglob("*.md"):
        assert not re.search(r"^#+ Status\b", page.read_text(), re.M), page


def test_the_readme_keeps_the_two_commands_and_links_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert "python -m runners.run experiment=quickstart" in readme
    assert 'pip install -e ".[test]" && python -m pytest' in readme
    assert "| gbdt_topk | gisette_like |" in readme
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).exists(), link
