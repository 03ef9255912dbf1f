"""``searchers/`` and ``schedulers/`` install as ``raytuner.searchers`` / ``raytuner.schedulers``.

Each case installs a copy of the project into a fresh virtual environment
and imports the packages from a directory outside the source tree. The
environment has no pip and no dependencies of its own: a ``.pth`` file
borrows the running one's (pip, setuptools and raytuner's dependencies),
and pip builds without an isolated build environment, which would install
setuptools again (an isolated build and a venv with pip took 22 s a case;
this takes about 5 s).
"""

from __future__ import annotations

import shutil
import site
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

PROBE = (
    "import raytuner.searchers, raytuner.schedulers, raytuner.store;"
    "from raytuner.searchers import RandomSearcher;"
    "print(raytuner.searchers.__file__); print(raytuner.schedulers.__file__)"
)


def _fresh_env(tmp_path: Path) -> Path:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "_borrowed_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def _copy_source(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            ".ci-venv",
            "*.egg-info",
            "build",
            "__pycache__",
            ".pytest_cache",
            ".hypothesis",
            "raytuner_results",
            "bench_out",
        ),
    )
    return source


@pytest.mark.parametrize("editable", [False, True], ids=["normal", "editable"])
def test_install_maps_searchers_and_schedulers(tmp_path: Path, editable: bool) -> None:
    python = _fresh_env(tmp_path)
    source = _copy_source(tmp_path)
    cmd = [
        str(python),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        *(["-e"] if editable else []),
        str(source),
    ]
    install = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    probe = subprocess.run(
        [str(python), "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=outside,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    searchers_file, schedulers_file = probe.stdout.split()
    if editable:  # the editable install points into the source tree
        assert Path(searchers_file) == source / "searchers" / "__init__.py"
        assert Path(schedulers_file) == source / "schedulers" / "__init__.py"
    else:  # the normal install copied them into the environment as raytuner/searchers
        assert Path(searchers_file).parent.parent.name == "raytuner"
        assert str(tmp_path / "venv") in searchers_file and str(source) not in searchers_file
    cli = subprocess.run(
        [str(python.parent / "raytuner"), "history", "--help"], capture_output=True, text=True, cwd=outside, timeout=120
    )
    assert cli.returncode == 0 and "import" in cli.stdout
