"""What a release needs: one version, the licence files, a wheel that works on its own, honest extras.

The build case builds the sdist and the wheel as a release does (``python -m build``: the wheel is built from
the sdist), but without an isolated build environment: the ``test`` extra installs the build system's
requirements, which ``build`` checks, and the build takes seconds instead of installing them twice; it installs
the *wheel* into a fresh virtual environment and, from a folder outside the checkout, runs the CLI and README's
MLA block. The environment borrows the running one's dependencies (``test_packaging``'s ``_fresh_env``), so the
wheel installs with ``--no-deps`` in seconds; the case checks that what it imports as ``raytuner`` is the
wheel's copy inside that environment, not the checkout.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from test_packaging import _copy_source, _fresh_env
from test_readme import README, python_blocks

import raytuner as rt
from raytuner.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
VERSION = PROJECT["version"]
#: Each folder, the extra that installs what it imports beyond the base dependencies, and the file that tells
#: its users so (README's test command installs ``test``).
FOLDER_EXTRAS = {
    "tests": ("test", "README.md", '".[test]"'),
    "examples": ("examples", "examples/_extras.py", 'EXTRA = "examples"'),
    "benchmarks": ("bench", "benchmarks/__init__.py", "'.[bench]'"),
}
#: The project's own top-level modules (installed by the base install, or run from the checkout).
OWN_MODULES = {"raytuner", "benchmarks", "examples"}
#: The commands the pre-commit hooks run, the checks README's test command starts with.
PRE_COMMIT_COMMANDS = ("ruff check", "ruff format --check", "mypy")


def test_version_is_pyproject_s() -> None:
    assert rt.__version__ == VERSION, "the installed metadata is stale: pip install -e . again"
    done = CliRunner().invoke(main, ["--version"])
    assert done.exit_code == 0 and done.output == f"raytuner {VERSION}\n"


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 300) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{args[:3]}: exit status {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )
    return done.stdout


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    # built from a copy: the sdist's build rewrites raytuner.egg-info beside the sources, which is the metadata
    # that importlib.metadata reads in the other tests (the checkout's root is on their sys.path)
    source = _copy_source(tmp_path)
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)], tmp_path, timeout=600)
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")

    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"LICENSE", "NOTICE", "README.md", "pyproject.toml"} <= in_sdist
    assert not [name for name in in_sdist if name.startswith("tests/data/")], "NOTICE says the data is not in the sdist"
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
        metadata = archive.read(f"raytuner-{VERSION}.dist-info/METADATA").decode()
    installed_as = {"raytuner": "raytuner", "searchers": "raytuner/searchers", "schedulers": "raytuner/schedulers"}
    package_data = {  # every file of the packages' folders that is not code: the wheel must carry it
        f"{package}/{path.relative_to(source / folder).as_posix()}"
        for folder, package in installed_as.items()
        for path in (source / folder).rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"}
    }
    assert "raytuner/py.typed" in package_data
    assert package_data <= in_wheel, f"not in the wheel: {sorted(package_data - in_wheel)}"
    assert {f"raytuner-{VERSION}.dist-info/licenses/{name}" for name in ("LICENSE", "NOTICE")} <= in_wheel
    assert f"\nVersion: {VERSION}\n" in metadata and "\nLicense-Expression: Apache-2.0\n" in metadata

    python = _fresh_env(tmp_path)
    _run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)], tmp_path, {"PATH": "/usr/bin:/bin"})
    outside = tmp_path / "elsewhere"
    (outside / "home").mkdir(parents=True)
    env = {"PATH": f"{python.parent}:/usr/bin:/bin", "HOME": str(outside / "home")}
    raytuner = str(python.parent / "raytuner")
    assert "Usage: raytuner" in _run([raytuner, "--help"], outside, env)
    assert _run([raytuner, "--version"], outside, env) == f"raytuner {VERSION}\n"
    file, version = _run(
        [str(python), "-c", "import raytuner as rt; print(rt.__file__); print(rt.__version__)"], outside, env
    ).split()
    assert Path(file).is_relative_to(tmp_path / "venv") and not Path(file).is_relative_to(ROOT), file
    assert version == VERSION
    (mla,) = [code for code in python_blocks(README.read_text(encoding="utf-8")) if "rt.MLA(" in code]
    assert "'x'" in _run([str(python), "-c", mla], outside, env)


def _requirement_names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(line).name) for line in requirements}


def _imported_modules(folder: Path) -> dict[str, str]:
    """Each top-level module the ``.py`` files of ``folder`` import (at their top or inside a function) and one
    file that imports it, leaving out the standard library, the project's own modules and the folder's."""
    files = sorted(folder.rglob("*.py"))
    local = {path.stem for path in files} | OWN_MODULES | set(sys.stdlib_module_names)
    found: dict[str, str] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top not in local:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("folder", sorted(FOLDER_EXTRAS))
def test_extra_provides_what_the_folder_imports(folder: str) -> None:
    extra, documented_in, words = FOLDER_EXTRAS[folder]
    assert words in (ROOT / documented_in).read_text(encoding="utf-8"), f"{documented_in} no longer names {extra}"
    allowed = _requirement_names(PROJECT["dependencies"]) | _requirement_names(PROJECT["optional-dependencies"][extra])
    providers = packages_distributions()
    missing = {
        module: where
        for module, where in _imported_modules(ROOT / folder).items()
        # a module that is not installed here (a bench peer) is matched by its name
        if not {canonicalize_name(d) for d in providers.get(module, [module])} & allowed
    }
    assert not missing, f"imported in {folder}/ but neither a dependency nor in the {extra!r} extra: {missing}"


def test_pre_commit_runs_the_checks_locally() -> None:
    config = ROOT / ".pre-commit-config.yaml"
    _run([sys.executable, "-m", "pre_commit", "validate-config", str(config)], ROOT)
    repos = yaml.safe_load(config.read_text(encoding="utf-8"))["repos"]
    assert [repo["repo"] for repo in repos] == ["local"], "pre-commit cannot fetch hook repositories here"
    hooks = repos[0]["hooks"]
    assert {hook["language"] for hook in hooks} == {"system"}
    entries = [" ".join([hook["entry"], *hook.get("args", [])]) for hook in hooks]
    for command in PRE_COMMIT_COMMANDS:
        assert any(re.fullmatch(rf"{re.escape(command)}( .*)?", entry) for entry in entries), (command, entries)


def _test_command(page: Path) -> str:
    lines = page.read_text(encoding="utf-8").splitlines()
    return lines[lines.index("<!-- test-command -->") + 2]  # the line after the block's opening fence


def test_contributing_gives_readme_s_test_command() -> None:
    assert _test_command(ROOT / "CONTRIBUTING.md") == _test_command(README)


def test_notice_names_every_data_file() -> None:
    notice = (ROOT / "NOTICE").read_text(encoding="utf-8")
    licence_notes = re.compile(r"(LICENSE|License|README).*")
    data = [
        path.relative_to(ROOT).as_posix()
        for folder in ("tests/data", "examples", "raytuner")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.is_file()
        and path.suffix not in {".py", ".pyc", ".pyi", ".sh", ".md"}
        and path.name != "py.typed"
        and "templates" not in path.parts  # the dashboard's pages: code, not data
        and not licence_notes.fullmatch(path.name)
    ]
    assert data, "no data files found: the folders moved"
    assert [name for name in data if name not in notice] == []


def test_changelog_has_a_dated_section_for_this_version_below_unreleased() -> None:
    """Keep a Changelog's form: ``## [Unreleased]`` first, then one dated section per version, this one among them."""
    headers = re.findall(r"^## \[([^\]]+)\](?: - (\S+))?", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert headers[0] == ("Unreleased", "")
    dated = dict(headers[1:])
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", dated.get(VERSION, "")), f"no dated section for {VERSION}: {headers}"
