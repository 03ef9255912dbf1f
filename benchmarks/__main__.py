"""``python -m benchmarks NAME --out DIR [--quick] [--data DIR] [--gptune DIR [--gptune-only]]``: run a benchmark from the repository's root.

Example::

    python -m benchmarks store --out bench_out --quick

A wrong name, missing peers or missing data is one line on stderr and exit
status 2; nothing is run or written.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from benchmarks import BENCHMARKS, run_benchmark
from raytuner.errors import RaytunerError


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run the benchmark, print where its results went; the exit status.

    Args:
        argv: the arguments (default ``None``: ``sys.argv[1:]``).
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description="Run benchmark NAME and write OUT/results.json and OUT/report.md."
    )
    parser.add_argument("name", metavar="NAME", help=f"one of: {', '.join(sorted(BENCHMARKS))}")
    parser.add_argument("--out", required=True, type=Path, help="Directory for results.json and report.md.")
    parser.add_argument("--quick", action="store_true", help="A small version that runs in a few minutes.")
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="The data folder searched first (default: the repository's tests/data, then ../shared/data).",
    )
    parser.add_argument(
        "--gptune",
        type=Path,
        default=None,
        help="The gptune-tuner folder: run GPTune's own tuner beside ours in mla and band "
        "(default: $RAYTUNER_GPTUNE; without it that peer is skipped).",
    )
    parser.add_argument(
        "--gptune-python",
        type=Path,
        default=None,
        help="The Python that runs GPTune (default: $RAYTUNER_GPTUNE_PYTHON, else this one).",
    )
    parser.add_argument(
        "--gptune-only", action="store_true", help="Run only the comparison with GPTune's own tuner (mla, band)."
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    try:
        run_benchmark(
            args.name,
            args.out,
            quick=args.quick,
            data=args.data,
            gptune=args.gptune,
            gptune_python=args.gptune_python,
            gptune_only=args.gptune_only,
        )
    except RaytunerError as err:
        print(f"Error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {args.out / 'results.json'} and {args.out / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
