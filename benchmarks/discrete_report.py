"""The human report of ``python -m benchmarks discrete``: a Markdown table, the goals and best-so-far plots per kernel.

Example:
    >>> _fmt(0.123456), _fmt(None)
    ('0.1235', '-')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.report import goal_lines, markdown_table, save_history_plot, verdict

__all__ = ["render_report", "save_plots"]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def save_plots(
    jobs: Sequence[Mapping[str, Any]], settings: Any, kernels: Mapping[str, Mapping[str, Any]], out: Path
) -> dict[str, str]:
    """One PNG per kernel: each method's mean best time found (over the optimum) after 20 .. 220 evaluations.

    Args:
        jobs: the finished jobs (each method's best-so-far curve per kernel and seed).
        settings: the benchmark's settings (its checkpoints).
        kernels: per kernel, its facts (the optimum among them).
        out: the folder for the PNG files.
    """
    plots: dict[str, str] = {}
    x = list(range(settings.n_initial, settings.evaluations + 1))
    for kernel, details in kernels.items():
        curves = {}
        for method in settings.methods:
            runs = [j["curve"] for j in jobs if j["kernel"] == kernel and j["method"] == method]
            if not runs:
                continue
            worst = max(v for r in runs for v in r if v is not None)
            rel = np.array([[(v if v is not None else worst) / details["optimum_ms"] for v in r] for r in runs])
            curves[method] = rel.mean(axis=0)[settings.n_initial - 1 :].tolist()
        name = f"best_so_far_{kernel}.png"
        if save_history_plot(
            curves,
            out / name,
            "function evaluations",
            "best time found / optimum (mean)",
            f"{kernel}: {details['configurations']} configurations",
            x=x,
            reference=1.0,
            legend_fontsize=6,
        ):
            plots[kernel] = name
    return plots


def render_report(results: Mapping[str, Any]) -> str:
    """``report.md``: settings, the table of MDF and MAE per kernel, the goals and the plots.

    Args:
        results: the benchmark's results (settings, kernels, rows, goals, plots).
    """
    s = results["settings"]
    kernels = results["kernels"]
    lines = [
        f"# Discrete BO on GPU-kernel spaces ({'quick' if results['quick'] else 'full'} run)",
        "",
        f"Command: `{results['command']}`, {results['elapsed_s']} s on {results['machine']['cores']} cores "
        f"({results['machine']['cpu_model']}).",
        "",
        f"Protocol: {s['n_initial']} initial + {s['evaluations'] - s['n_initial']} further evaluations, "
        f"{s['repeats']} repeats per method (seeds {s['seeds'][0]}..{s['seeds'][-1]}); MAE against the global "
        f"optimum at evaluations {s['checkpoints'][0]}, {s['checkpoints'][1]}, ..., {s['checkpoints'][-1]}; "
        "MDF = mean over kernels of (method's mean MAE / mean MAE of all methods on the kernel). Lower is "
        "better. Kernel Tuner 1.5 runs in simulation mode on the same cache files.",
        "",
        markdown_table(
            ["kernel", "device", "configurations", "failed", "optimum (ms)"],
            [
                [k, d["device"], d["configurations"], d["failed"], _fmt(d["optimum_ms"])]
                for k, d in results["kernel_details"].items()
            ],
        ),
        "",
    ]
    rows = sorted(results["rows"], key=lambda r: r["mdf"])
    lines += [
        markdown_table(
            ["method", "MDF", "MDF sd", *[f"MAE {k}" for k in kernels], "ms / suggestion (median)", "runs"],
            [
                [
                    r["method"],
                    _fmt(r["mdf"]),
                    _fmt(r["mdf_sd"]),
                    *[_fmt(r["mae_by_kernel"].get(k)) for k in kernels],
                    _fmt(r["suggest_ms_median"]),
                    r["runs"],
                ]
                for r in rows
            ],
        ),
        "",
        "ms / suggestion: raytuner's median time of an ask that fits and searches the model (every "
        "unvisited valid configuration scored); a peer's wall time per evaluation, lookups included.",
        "",
        "## Goals",
        "",
    ]
    lines += goal_lines(
        results["goals"],
        {
            "lowest_mdf": lambda g: f"Lowest MDF: **{g['best_method']}** ({verdict(g)}).",
            "below_kernel_tuner_bayes_opt": lambda g: (
                f"{g['raytuner']} MDF / {g['kernel_tuner']} MDF = "
                f"{g['mdf_ratio']:.3f} (at most 0.8 required: {verdict(g)})."
            ),
            "suggest_ms_gemm": lambda g: (
                f"One suggestion on gemm ({g['candidates']} candidates): median "
                f"{g['median']} ms, p95 {g['p95']} ms, max {g['max']} ms (at most 200 ms: "
                f"{verdict(g)})."
            ),
        },
    )
    lines += ["", "## Best time found per kernel", ""]
    lines += [f"![{k}]({png})" for k, png in results["plots"].items()]
    return "\n".join(lines) + "\n"
