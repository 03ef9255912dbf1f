"""The API reference lists every public class and function: a name of ``rt.__all__``, or a class or
function of a documented module's ``__all__``, that the built reference lacks fails here.

The docs are built once per session with ``mkdocs build --strict`` into a temporary folder; each
reference page's ``::: identifier`` lines say which modules it documents. mkdocstrings gives every
rendered object a heading whose ``id`` is its full path, so a name is on a page when a heading id
ends with ``.NAME``. (A package re-exporting a class from a submodule that griffe cannot resolve,
as ``searchers/`` installed as ``raytuner.searchers`` once was, renders its docstring alone and
passes a strict build: that is what this test catches.)
"""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import raytuner as rt

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"
DIRECTIVE = re.compile(r"^::: (?P<identifier>[\w.]+)[ \t]*$", re.MULTILINE)
HEADING_ID = re.compile(r'<h[1-6][^>]*\bid="(?P<id>[^"]+)"')
# the repository's top-level folders installed under another name (pyproject's package-dir)
INSTALLED_AS = {"searchers": "raytuner.searchers", "schedulers": "raytuner.schedulers"}


def _module_of(identifier: str) -> str | None:
    """The installed module a ``::: identifier`` documents (``None`` for a class or function)."""
    top, _, rest = identifier.partition(".")
    name = INSTALLED_AS.get(top, top) + ("." + rest if rest else "")
    try:
        importlib.import_module(name)
    except ImportError:
        return None
    return name


@pytest.fixture(scope="session")
def reference_ids(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Per reference page (its file name without ``.md``), the heading ids of its built HTML."""
    site = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-4000:]
    ids: dict[str, set[str]] = {}
    for page in REFERENCE.glob("*.md"):
        html = site / "reference" / ("" if page.stem == "index" else page.stem) / "index.html"
        ids[page.stem] = {match["id"] for match in HEADING_ID.finditer(html.read_text())}
    return ids


def _is_class_or_function(value: object) -> bool:
    """Whether the reference must show ``value``: constants and type aliases need not have a heading."""
    return inspect.isclass(value) or inspect.isfunction(value)


def _listed(name: str, ids: set[str]) -> bool:
    return any(heading == name or heading.endswith("." + name) for heading in ids)


def test_every_documented_module_lists_its_public_names(reference_ids: dict[str, set[str]]) -> None:
    missing: list[str] = []
    for page in sorted(REFERENCE.glob("*.md")):
        for identifier in DIRECTIVE.findall(page.read_text()):
            module_name = _module_of(identifier)
            if module_name is None:
                continue
            module = importlib.import_module(module_name)
            public = [name for name in getattr(module, "__all__", ()) if _is_class_or_function(getattr(module, name))]
            missing += [
                f"{page.name}: {module_name}.{name}" for name in public if not _listed(name, reference_ids[page.stem])
            ]
    assert not missing, "missing from the API reference:\n" + "\n".join(missing)


def test_every_name_of_rt_all_is_in_the_reference(reference_ids: dict[str, set[str]]) -> None:
    every_id = set().union(*reference_ids.values())
    public = [name for name in rt.__all__ if not name.startswith("__")]
    assert len(public) > 30
    missing = [name for name in public if not _listed(name, every_id)]
    assert not missing, f"rt.__all__ names missing from the API reference: {missing}"


def test_the_searchers_page_shows_its_classes(reference_ids: dict[str, set[str]]) -> None:
    assert _listed("LCMSearcher", reference_ids["searchers"])
    assert _listed("GPTuneBandScheduler", reference_ids["schedulers"])
    assert _listed("GPTuneBandOptions", reference_ids["schedulers"])
