"""``raytuner bench NAME --out DIR [--quick]``: run a benchmark (loaded only when asked for).

Example::

    raytuner bench store --out bench_out --quick
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

__all__ = ["bench"]


@click.command()
@click.argument("name")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Directory for results.json and report.md.")
@click.option("--quick", is_flag=True, help="A small version that runs in a few minutes.")
def bench(name: str, out: str, quick: bool) -> None:
    """Run benchmark NAME and write OUT/results.json and OUT/report.md."""
    from raytuner.bench import BENCHMARKS, run_benchmark  # noqa: PLC0415 - the only place that loads them

    if name not in BENCHMARKS:
        raise click.BadParameter(f"unknown benchmark {name!r}; choose one of: {', '.join(sorted(BENCHMARKS))}",
                                 param_hint="NAME")
    logging.getLogger().setLevel(min(logging.getLogger().level, logging.INFO))
    run_benchmark(name, Path(out), quick=quick)
    click.echo(f"wrote {Path(out) / 'results.json'} and {Path(out) / 'report.md'}")
