"""The program a remote HPC job tunes: a blocked matrix product C = A @ B, timed.

It multiplies two random n×n matrices block by block (``block`` rows and
columns at a time, loops in ``loop_order``), checks the result against
``A @ B`` and prints the best wall-clock time of ``repeat`` runs in seconds.
Small blocks pay Python overhead per block, large ones lose cache locality:
the runtime is a real function of the configuration.

    python program.py --n 256 --block 32 --loop-order ikj
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

ORDERS = ("ijk", "ikj", "jik")


def blocked_matmul(a: np.ndarray, b: np.ndarray, block: int, loop_order: str = "ijk") -> np.ndarray:
    """``a @ b`` computed on ``block``-sized tiles, looping over tile indices in ``loop_order``."""
    n = a.shape[0]
    c = np.zeros((n, b.shape[1]))
    starts = range(0, n, block)
    for x in starts:
        for y in starts:
            for z in starts:
                i, j, k = _ijk(loop_order, x, y, z)
                c[i : i + block, j : j + block] += a[i : i + block, k : k + block] @ b[k : k + block, j : j + block]
    return c


def _ijk(loop_order: str, x: int, y: int, z: int) -> tuple[int, int, int]:
    position = dict(zip(loop_order, (x, y, z)))
    return position["i"], position["j"], position["k"]


def measure(n: int, block: int, loop_order: str = "ijk", repeat: int = 3, seed: int = 0) -> float:
    """Best time in seconds of ``repeat`` blocked products of two random n×n matrices (result checked)."""
    if loop_order not in ORDERS:
        raise ValueError(f"loop_order {loop_order!r} is not one of {ORDERS}")
    if block < 1:
        raise ValueError(f"block {block} must be at least 1")
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        c = blocked_matmul(a, b, block, loop_order)
        best = min(best, time.perf_counter() - start)
    if not np.allclose(c, a @ b):
        raise RuntimeError("the blocked product is wrong")
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--block", type=int, required=True)
    parser.add_argument("--loop-order", default="ijk", choices=ORDERS)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{measure(args.n, args.block, args.loop_order, args.repeat):.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
