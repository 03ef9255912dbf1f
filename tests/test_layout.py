"""The package's shape, as ``../shared/DESIGN.md`` draws it: layers, no circles, small files.

Every ``import`` statement of the library is read from the source (lazy
imports inside functions and ``TYPE_CHECKING`` imports included), with the
``package-dir`` mapping of ``pyproject.toml`` applied (``searchers/`` is
``raytuner.searchers``, ``schedulers/`` is ``raytuner.schedulers``), so a
circle cannot hide behind it. The checks:

- no circle between modules, and none between packages;
- no arrow runs back up the layers (a lower layer never imports a higher
  one; faces import another face only through its public modules);
- the benchmarks (``benchmarks/`` at the repository's root, read here too)
  sit on top: nothing in the library imports them, and they are not installed;
  nothing in the library imports the test harnesses (``raytuner.testing``);
- engines, models and the session never import Ray, gRPC or MongoDB.

A module is split when it holds two ideas, not to fit a line count: there is no cap.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (layer name, rank, module prefixes); the longest matching prefix decides. Higher ranks import lower ones.
LAYERS: list[tuple[str, int, tuple[str, ...]]] = [
    (
        "problem",
        0,
        # with the helpers every layer may use: errors, lazily imported names, signed credentials
        ("raytuner.problem", "raytuner.errors", "raytuner.test_problems", "raytuner.lazy", "raytuner.signing"),
    ),
    ("stores", 1, ("raytuner.store",)),
    ("models", 2, ("raytuner.models", "raytuner.analysis")),
    ("crowd", 3, ("raytuner.crowd",)),
    ("engines", 4, ("raytuner.engines",)),
    ("session", 5, ("raytuner.session",)),
    ("protocol", 6, ("raytuner.protocol",)),
    ("views", 6, ("raytuner.view",)),  # read-only views of histories and sessions: tables, plots
    ("harness", 7, ("raytuner.testing",)),  # for tests, examples and benchmarks only: may start a face
    (
        "faces",
        7,
        (
            "raytuner.searchers",
            "raytuner.schedulers",
            "raytuner.service",
            "raytuner.client",
            "raytuner.cli",
            "raytuner.dashboard",
        ),
    ),
    ("benchmarks", 9, ("benchmarks",)),  # the repository's benchmarks, outside the library
]
#: ``raytuner`` itself (``raytuner/__init__.py``): the front door, which names what every layer offers.
FRONT = ("front", 8)
#: The benchmarks' folder (not installed; its modules are ``benchmarks.*``).
BENCHMARKS = "benchmarks"
#: Third-party packages that only faces, stores and the executor seam may import.
SERVICES = ("ray", "grpc", "pymongo")
NO_SERVICES = ("raytuner.engines", "raytuner.models", "raytuner.session", "raytuner.problem")
#: The executor seam: where model work may run on Ray actors (it imports Ray only when asked to).
SEAMS = ("raytuner.models.executors",)


@dataclass(frozen=True)
class Import:
    """One import statement: from module ``source`` (line ``line``) of ``target``."""

    source: str
    target: str
    line: int


def _modules() -> dict[str, Path]:
    """Every library module by its installed name, through pyproject's package-dir mapping."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    modules: dict[str, Path] = {}
    for package, folder in mapping.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([package, *parts])
            if name.split(".")[1:2] in (["searchers"], ["schedulers"]) and folder == "raytuner":
                continue  # mapped elsewhere
            modules[name] = path
    for path in sorted((ROOT / BENCHMARKS).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports() -> tuple[list[Import], list[Import]]:
    """(imports of library modules, imports of third-party service packages) of every module."""
    inner: list[Import] = []
    outer: list[Import] = []
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] in SERVICES:
                    outer.append(Import(name, target.split(".")[0], node.lineno))
                resolved = _resolve(target) if target.split(".")[0] in ("raytuner", BENCHMARKS) else None
                if resolved and resolved != name:
                    inner.append(Import(name, resolved, node.lineno))
    return inner, outer


IMPORTS, SERVICE_IMPORTS = _imports()


def layer(module: str) -> tuple[str, int]:
    """The layer of ``module``: its name and rank."""
    if module == "raytuner":
        return FRONT
    best = max(
        (
            (prefix, name, rank)
            for name, rank, prefixes in LAYERS
            for prefix in prefixes
            if module == prefix or module.startswith(prefix + ".")
        ),
        key=lambda t: len(t[0]),
    )
    return best[1], best[2]


def _unit(module: str) -> str:
    """The package a module belongs to for the package-level picture (``raytuner.X``)."""
    return ".".join(module.split(".")[:2])


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_is_read() -> None:
    """The checks below see the whole library (a broken reader would pass them all)."""
    assert len(MODULES) > 100
    assert "raytuner.searchers.engine_searcher" in MODULES and "raytuner.schedulers.gptuneband" in MODULES
    assert "benchmarks" in MODULES and "benchmarks.band" in MODULES
    assert len(IMPORTS) > 300
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_circle_between_modules() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for edge in IMPORTS:
        edges[edge.source].add(edge.target)
    assert _cycles(edges) == []


def test_no_circle_between_packages() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for edge in IMPORTS:
        if _unit(edge.source) != _unit(edge.target):
            edges[_unit(edge.source)].add(_unit(edge.target))
    assert _cycles(edges) == []


def test_no_arrow_runs_back_up() -> None:
    back = [
        f"{e.source}:{e.line} ({layer(e.source)[0]}) imports {e.target} ({layer(e.target)[0]})"
        for e in IMPORTS
        if layer(e.target)[1] > layer(e.source)[1]
    ]
    assert back == []


def test_faces_use_each_other_only_through_public_modules() -> None:
    """A face may use another face's public modules (the CLI starts a server), never a private one."""
    private = [
        f"{e.source}:{e.line} imports {e.target}"
        for e in IMPORTS
        if layer(e.source)[0] == layer(e.target)[0] == "faces"
        and _unit(e.source) != _unit(e.target)
        and any(part.startswith("_") for part in e.target.split("."))
    ]
    assert private == []


def _is_benchmark(module: str) -> bool:
    return module.split(".")[0] == BENCHMARKS


def test_benchmarks_and_harnesses_are_leaves() -> None:
    """Nothing in the library imports the benchmarks or the harnesses; the benchmarks may use both."""
    loaders = [
        f"{e.source}:{e.line} imports {e.target}"
        for e in IMPORTS
        if _is_benchmark(e.target) and not _is_benchmark(e.source)
    ]
    assert loaders == []
    harness = [
        f"{e.source}:{e.line} imports {e.target}"
        for e in IMPORTS
        if _unit(e.target) == "raytuner.testing"
        and _unit(e.source) != "raytuner.testing"
        and not _is_benchmark(e.source)
    ]
    assert harness == []


def test_engines_models_and_session_never_import_ray_grpc_or_mongodb() -> None:
    found = [
        f"{e.source}:{e.line} imports {e.target}"
        for e in SERVICE_IMPORTS
        if any(e.source == p or e.source.startswith(p + ".") for p in NO_SERVICES) and e.source not in SEAMS
    ]
    assert found == []


def test_every_package_is_installed() -> None:
    """``pyproject.toml`` lists every package (a new subpackage left out would be missing from the wheel)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {name for name, path in MODULES.items() if path.name == "__init__.py" and not _is_benchmark(name)}
    assert packages - set(setuptools["packages"]) == set()
    assert [name for name in setuptools["packages"] if _is_benchmark(name)] == []  # the wheel is the library


def test_a_lazy_package_gives_its_submodules_as_attributes() -> None:
    # 0.1 imported raytuner.crowd's modules with the package, so raytuner.crowd.repository was there;
    # the lazy package imports a submodule when it is first named, and still knows no other name
    code = (
        "import sys, raytuner.crowd as c; assert 'pymongo' not in sys.modules; "
        "assert c.repository.CrowdRepository is c.CrowdRepository and c.errors.AccessDenied is c.AccessDenied; "
        "assert not hasattr(c, 'nothing') and not hasattr(c, '__path_hooks__')"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
