"""Every ```python block of README.md and of the documentation (``docs/``) runs on its own, as written.

Each block runs as ``python -c CODE`` in an empty temporary directory (its
stores land there) and must exit with status 0. The blocks that start Ray are
marked slow (Ray's start costs 5-20 s a block on a busy machine); the crowd
block starts a throwaway ``mongod`` (the ``test`` extra's binary). Pages that
lost their Python blocks fail the count check instead of passing with
nothing to run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: README and every page of the documentation, in a stable order.
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: How many Python blocks README and the documentation have today (README: driving an engine, GPTuneBand; the
#: pages: the quick start, transfer learning, GPU kernels, remote jobs, the crowd repository, ...); lower it
#: only when a block is merged into another, never to pass.
EXPECTED_BLOCKS = 11
TIMEOUT_S = 300


def python_blocks(text: str) -> list[str]:
    """The code of every fenced ```python block of ``text``, in order.

    Args:
        text: Markdown.

    >>> python_blocks("a\\n```python\\nx = 1\\n```\\n```bash\\nls\\n```\\n")
    ['x = 1\\n']
    """
    return [match.group(1) for match in BLOCK.finditer(text)]


#: (page, code) of every block.
BLOCKS = [(page, code) for page in PAGES for code in python_blocks(page.read_text(encoding="utf-8"))]


def _case(index: int, page: Path, code: str) -> object:
    first = next(
        (line for line in code.splitlines() if line.startswith(("from raytuner", "import raytuner"))),
        code.splitlines()[0] if code.strip() else "",
    )
    marks = [pytest.mark.slow] if re.search(r"^(import ray|from ray )", code, re.MULTILINE) else []
    return pytest.param(code, id=f"{page.relative_to(ROOT)}:{index}:{first[:50]}", marks=marks)


def test_readme_has_its_python_blocks() -> None:
    assert len(BLOCKS) >= EXPECTED_BLOCKS, f"the pages have {len(BLOCKS)} ```python blocks, expected {EXPECTED_BLOCKS}"
    assert all(code.strip() for _, code in BLOCKS)


@pytest.mark.parametrize("code", [_case(i, page, code) for i, (page, code) in enumerate(BLOCKS)])
def test_readme_block_runs_as_written(code: str, tmp_path: Path) -> None:
    home = tmp_path / "home"  # Ray Tune writes to ~/ray_results unless told otherwise: keep it in here
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S, env=env
    )
    assert done.returncode == 0, (
        f"exit status {done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-5000:]}"
    )
    # every store the block wrote holds its GPTune files whole, with no journal or lock file left behind
    ours = (".json.journal", ".json.lock", ".jsonl.lock")  # a store's journal and lock files, the ledger's lock
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.name.endswith(ours))
    assert not left, f"left behind: {left}"
    if "raytuner_results" in code and 'problem_name="my-solver"' in code:
        assert (tmp_path / "raytuner_results" / "my-solver.json").is_file()


def test_readme_s_examples_start_from_rt_and_fit_in_twelve_lines() -> None:
    """README's two examples (multitask BO driving an engine, GPTuneBand under Ray Tune) are short and use ``rt.``."""
    examples = python_blocks(README.read_text(encoding="utf-8"))
    assert len(examples) == 2
    for code in examples:
        lines = [line for line in code.splitlines() if line.strip()]
        imports = [line for line in lines if line.startswith(("import ", "from "))]
        assert len(lines) <= 12, code
        assert "import raytuner as rt" in imports and set(imports) <= {"import raytuner as rt", "from ray import tune"}
    assert "rt.MLA(" in examples[0] and "rt.GPTuneBandScheduler" in examples[1]
