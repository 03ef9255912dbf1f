"""The TLA benchmark's summaries, goals, report and plots (:mod:`benchmarks.tla`).

:func:`summarise` turns one scenario's raw traces into its ``results.json``
entry, :func:`goals` judges the paper's claims over scenarios (a)-(f), and
:func:`render_report` writes ``report.md`` from ``results`` alone, so a
report can be rendered again from a saved run::

    results = json.loads(Path("bench_out/tla/results.json").read_text())
    text = render_report(results)        # the same text as bench_out/tla/report.md

**Regret** is best-so-far minus the target's known optimum; the
**normalised regret** divides it by the scenario's scale, the median of the
target over 10,000 random configurations minus the optimum (0 = optimum
found, 1 = a typical random configuration), so that scenarios of different
output scales can be averaged.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.report import markdown_table, save_history_plot
from raytuner.analysis import best_so_far

__all__ = [
    "CHECKPOINTS",
    "SINGLE",
    "ENSEMBLES",
    "REFERENCE",
    "ENSEMBLE_TOLERANCE",
    "summarise",
    "goals",
    "render_report",
    "save_plots",
    "versus_reference",
]

CHECKPOINTS: tuple[int, ...] = (5, 10, 20)
REFERENCE = "NoTLA"
SINGLE: tuple[str, ...] = ("Multitask(PS)", "Multitask(TS)", "WeightedSum(equal)", "WeightedSum(dynamic)", "Stacking")
ENSEMBLES: tuple[str, ...] = ("Ensemble(toggling)", "Ensemble(prob)", "Ensemble(proposed)")
ENSEMBLE_TOLERANCE = 0.05


def _round(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


def _mean_sd(values: np.ndarray) -> list[float | None] | None:
    """``[mean, sd]`` of the finite values (sample sd; 0 for one value); ``None`` when there are none.

    >>> _mean_sd(np.array([1.0, 3.0, np.nan]))
    [2.0, 1.414214]
    """
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    sd = float(np.std(finite, ddof=1)) if finite.size > 1 else 0.0
    return [_round(float(np.mean(finite))), _round(sd)]


def _ranks(means: Mapping[str, float | None]) -> dict[str, float]:
    """Rank 1 = lowest mean; ties share the average rank; a tuner without a value ranks last.

    >>> _ranks({"a": 2.0, "b": 1.0, "c": 2.0, "d": None})
    {'a': 2.5, 'b': 1.0, 'c': 2.5, 'd': 4.0}
    """
    keyed = {t: math.inf if m is None else m for t, m in means.items()}
    return {
        t: 1 + sum(o < v for o in keyed.values()) + 0.5 * (sum(o == v for o in keyed.values()) - 1)
        for t, v in keyed.items()
    }


def summarise(raw: Mapping[str, Any], checkpoints: Sequence[int]) -> dict[str, Any]:
    """One scenario's ``results.json`` entry from its raw traces (see :func:`benchmarks.tla.run_scenario`).

    Args:
        raw: the scenario's raw traces, as :func:`benchmarks.tla.run_scenario` returns them.
        checkpoints: the evaluation counts to summarise at.
    """
    optimum, scale = float(raw["optimum"]), float(raw["scale"])
    curves, bsf_stats, regret, norm, ranks, proposers, asks, failed, outside, runs = (
        dict[str, Any]() for _ in range(10)
    )
    for tuner, traces in raw["traces"].items():
        values = np.array([t.values for t in traces], dtype=float)  # (seeds, evaluations)
        bsf = best_so_far(values)
        bsf_stats[tuner] = {str(k): _mean_sd(bsf[:, k - 1]) for k in checkpoints}
        regret[tuner] = {str(k): _mean_sd(bsf[:, k - 1] - optimum) for k in checkpoints}
        norm[tuner] = {
            str(k): _round(float(np.nanmean((bsf[:, k - 1] - optimum) / scale)))
            if np.isfinite(bsf[:, k - 1]).any()
            else None
            for k in checkpoints
        }
        with np.errstate(all="ignore"):
            mean_curve = np.nanmean(np.where(np.isfinite(bsf), bsf, np.nan), axis=0) if len(bsf) else bsf
        curves[tuner] = [_round(float(v)) for v in np.atleast_1d(mean_curve)]
        counts = Counter(p for t in traces for p in t.proposers)
        proposers[tuner] = dict(counts.most_common())
        asks[tuner] = _round(statistics.median([a for t in traces for a in t.ask_seconds]), 4)
        failed[tuner] = sum(t.failed for t in traces)
        outside[tuner] = sum(t.outside_valid for t in traces)
        runs[tuner] = [[_round(v) for v in t.values] for t in traces]
    for k in checkpoints:
        rk = _ranks({t: (s[str(k)] or [None])[0] for t, s in bsf_stats.items()})
        for tuner, r in rk.items():
            ranks.setdefault(tuner, {})[str(k)] = r
    return {
        "id": raw["id"],
        "description": raw["description"],
        "function": raw["function"],
        "sources": raw["sources"],
        "target": raw["target"],
        "optimum": _round(optimum),
        "scale": _round(scale),
        "seeds": raw["seeds"],
        "source_samples_per_task": raw["source_samples_per_task"],
        "best_so_far": bsf_stats,
        "rank": ranks,
        "regret": regret,
        "normalised_regret": norm,
        "curves": curves,
        "proposers": proposers,
        "ask_seconds_median": asks,
        "failed_evaluations": failed,
        "outside_valid_space": outside,
        "runs": runs,
        "wall_s": round(float(raw["wall_s"]), 1),
        **({"notla_unconstrained": raw["notla_unconstrained"]} if "notla_unconstrained" in raw else {}),
    }


def _average(scenarios: Sequence[Mapping[str, Any]], tuner: str, keys: Sequence[str]) -> float | None:
    """Mean normalised regret of ``tuner`` over the scenarios (and checkpoints ``keys``) that have it."""
    values = [
        s["normalised_regret"][tuner][k]
        for s in scenarios
        if tuner in s["normalised_regret"]
        for k in keys
        if s["normalised_regret"][tuner].get(k) is not None
    ]
    return _round(float(np.mean(values))) if values else None


def _no_worse(scenarios: Sequence[Mapping[str, Any]], better: str, worse: str, keys: Sequence[str]) -> dict[str, Any]:
    a, b = _average(scenarios, better, keys), _average(scenarios, worse, keys)
    return {
        "met": None if a is None or b is None else a <= b,
        "detail": {
            "mean_normalised_regret": {better: a, worse: b},
            "checkpoints": list(keys),
            "per_scenario_at_last_checkpoint": {
                s["id"]: {t: s["normalised_regret"].get(t, {}).get(keys[-1]) for t in (better, worse)}
                for s in scenarios
            },
        },
    }


def versus_reference(summary: Mapping[str, Any], reference: str = REFERENCE) -> dict[str, dict[str, float | None]]:
    """Each tuner's mean best so far over the reference's (NoTLA's), per checkpoint: below 1 is better.

    Args:
        summary: the scenario's summary (its ``best_so_far`` per tuner and checkpoint: mean and spread).
        reference: the tuner to divide by (default ``"NoTLA"``).

    >>> versus_reference({"best_so_far": {"NoTLA": {"10": [2.0, 0.1]}, "Stacking": {"10": [1.5, 0.2]}}})
    {'Stacking': {'10': 0.75}}
    """
    ref = summary["best_so_far"].get(reference)
    if ref is None:
        return {}
    return {
        t: {k: _round(v[0] / ref[k][0]) if v and ref.get(k) and ref[k][0] else None for k, v in stats.items()}
        for t, stats in summary["best_so_far"].items()
        if t != reference
    }


def goals(scenarios: Sequence[Mapping[str, Any]], checkpoints: Sequence[int]) -> dict[str, dict[str, Any]]:
    """The four claims of section VI-A, each ``{"met": bool | None, "detail": ...}`` (``None``: not measured).

    Args:
        scenarios: the scenarios' summaries, as :func:`summarise` returns them.
        checkpoints: the evaluation counts the claims are judged at.
    """
    keys = [str(k) for k in checkpoints]
    at10 = "10" if "10" in keys else keys[-1]
    final = keys[-1]
    tuners = [t for t in SINGLE + ENSEMBLES if any(t in s["best_so_far"] for s in scenarios)]
    reference = _average(scenarios, REFERENCE, [at10])
    averages = {t: _average(scenarios, t, [at10]) for t in tuners}
    losers = [t for t, v in averages.items() if reference is None or v is None or v >= reference]
    beat = {
        "met": None if reference is None or not tuners else not losers,
        "detail": {
            "checkpoint": int(at10),
            "mean_normalised_regret": {REFERENCE: reference, **averages},
            "not_better_than_NoTLA": losers,
        },
    }
    rows, within = {}, []
    for s in scenarios:
        singles = {
            t: s["best_so_far"][t][final][0]
            for t in SINGLE
            if t in s["best_so_far"] and s["best_so_far"][t][final] is not None
        }
        ensemble = (s["best_so_far"].get("Ensemble(proposed)", {}).get(final) or [None])[0]
        if not singles or ensemble is None:
            continue
        best_name = min(singles, key=lambda t: singles[t])
        best = singles[best_name]
        ok = ensemble <= best + ENSEMBLE_TOLERANCE * abs(best)
        within.append(ok)
        rows[s["id"]] = {
            "ensemble": ensemble,
            "best_single": best_name,
            "best_single_value": best,
            "relative_gap": _round((ensemble - best) / abs(best)) if best else None,
            "within": ok,
            "normalised_regret_gap": _round(
                s["normalised_regret"]["Ensemble(proposed)"][final] - s["normalised_regret"][best_name][final]
            ),
        }
    return {
        "tla_beats_notla_at_10": beat,
        "ensemble_within_5pct_of_best_single_at_20": {
            "met": all(within) if within else None,
            "detail": {"checkpoint": int(final), "per_scenario": rows},
        },
        "multitask_ts_no_worse_than_ps": _no_worse(scenarios, "Multitask(TS)", "Multitask(PS)", keys),
        "weighted_sum_dynamic_no_worse_than_equal": _no_worse(
            scenarios, "WeightedSum(dynamic)", "WeightedSum(equal)", keys
        ),
    }


def save_plots(summary: Mapping[str, Any], out: Path) -> str | None:
    """The scenario's mean best-so-far per tuner to ``out/tla_{id}.png``; its name, or ``None`` without matplotlib.

    Args:
        summary: the scenario's summary, as :func:`summarise` returns it.
        out: the folder for the PNG.
    """
    name = f"tla_{summary['id']}.png"
    done = save_history_plot(
        summary["curves"],
        Path(out) / name,
        "function evaluations",
        "best so far (mean over seeds)",
        f"({summary['id']}) {summary['description']}",
        reference=summary["optimum"],
        style={"linewidth": 1.3},
        legend_fontsize=7,
    )
    return name if done else None


def _verdict(flag: bool | None) -> str:
    return "not measured" if flag is None else "met" if flag else "**missed**"


def _stat(stat: Sequence[float | None] | None) -> str:
    if stat is None or stat[0] is None:
        return "-"
    return f"{stat[0]:.4g} ± {stat[1] or 0:.2g}"


def _cell(stat: Sequence[float | None] | None, rank: float | None) -> str:
    text = _stat(stat)
    return text if text == "-" or rank is None else f"{text} ({rank:g})"


def _scenario_lines(s: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    rows = []
    for tuner, stats in s["best_so_far"].items():
        props = s["proposers"].get(tuner, {})
        extra = [f"{n}:{c}" for n, c in props.items()] if tuner in ENSEMBLES else []
        rows.append(
            [
                tuner,
                *[_cell(stats.get(k), s["rank"][tuner].get(k)) for k in keys],
                *[_stat(s["regret"][tuner].get(k)) for k in keys[-1:]],
                s["ask_seconds_median"][tuner],
                " ".join(extra) or "-",
            ]
        )
    header = ["tuner", *[f"best @{k} (rank)" for k in keys], f"regret @{keys[-1]}", "median ask s", "proposers"]
    lines = [
        f"### ({s['id']}) {s['description']}",
        "",
        f"Optimum {s['optimum']:.6g}; regret scale {s['scale']:.4g}; {len(s['seeds'])} seed(s); "
        f"{s['source_samples_per_task']} source samples per source task. Scenario wall time {s['wall_s']} s.",
        "",
        markdown_table(header, rows),
        "",
    ]
    if any(s["outside_valid_space"].values()) or any(s["failed_evaluations"].values()):
        lines += [
            f"Failed evaluations per tuner (all seeds): {s['failed_evaluations']}; of which outside the valid "
            f"space: {s['outside_valid_space']}.",
            "",
        ]
    if s.get("plot"):
        lines += [f"![({s['id']}) best so far]({s['plot']})", ""]
    return lines


def render_report(results: Mapping[str, Any]) -> str:
    """The human summary: one table per scenario, the goals, the cross-machine case, the machine.

    Args:
        results: the benchmark's results (scenarios, goals, cross-machine case, machine).
    """
    st, g, m = results["settings"], results["goals"], results["machine"]
    keys = [str(k) for k in st["checkpoints"]]
    lines = [
        f"# TLA benchmark: GPTuneCrowd's transfer-learning algorithms vs NoTLA (Figure 3)"
        f"{' (quick)' if results['quick'] else ''}",
        "",
        f"Command: `{results['command']}`. Elapsed {results.get('elapsed_s')} s.",
        "",
    ]
    if results["quick"]:
        lines += [f"Quick run: {len(st['seeds'])} seeds (the full run has 5); the figures are indicative.", ""]
    lines += [
        "Each cell is the mean ± sd over seeds of the best value found after k target evaluations "
        "(minimised; failed evaluations keep the previous best) and, in brackets, the tuner's rank by that "
        "mean (1 = best). Regret = best so far - the target's optimum (demo: a dense grid; Branin: a grid "
        "and a bounded polish; kernel: the cache's best time). The normalised regret used by the goals "
        "divides the regret by the scenario's scale (median of 10,000 random configurations - optimum). "
        f"Source: {st['source_samples_per_task']} uniformly random samples per source task (seed "
        f"{st['source_seed']}); Branin tasks drawn with seed {st['branin_task_seed']}: "
        + "; ".join(f"{k} = " + ", ".join(f"{n}={v:.4g}" for n, v in t.items()) for k, t in st["branin_tasks"].items())
        + ".",
        "",
        "## Scenarios (a)-(f)",
        "",
    ]
    for s in results["scenarios"]:
        lines += _scenario_lines(s, keys)
    b, e, mt, ws = (
        g["tla_beats_notla_at_10"],
        g["ensemble_within_5pct_of_best_single_at_20"],
        g["multitask_ts_no_worse_than_ps"],
        g["weighted_sum_dynamic_no_worse_than_equal"],
    )
    lines += [
        "## Goals (over the scenarios run)",
        "",
        f"1. Every TLA algorithm beats NoTLA at {b['detail']['checkpoint']} evaluations (mean normalised "
        f"regret over scenarios): {_verdict(b['met'])}. Means: {b['detail']['mean_normalised_regret']}; not "
        f"better: {b['detail']['not_better_than_NoTLA'] or 'none'}.",
        f"2. Ensemble(proposed) within {ENSEMBLE_TOLERANCE:.0%} of the best single TLA algorithm at "
        f"{e['detail']['checkpoint']} evaluations in every scenario (mean best so far): {_verdict(e['met'])}. "
        + "; ".join(
            f"({i}) {r['ensemble']:.4g} vs {r['best_single']} {r['best_single_value']:.4g}"
            f"{'' if r['within'] else ' **out**'}"
            for i, r in e["detail"]["per_scenario"].items()
        ),
        f"3. Multitask(TS) no worse than Multitask(PS) (mean normalised regret over scenarios and checkpoints "
        f"{keys}): {_verdict(mt['met'])} {mt['detail']['mean_normalised_regret']}.",
        f"4. WeightedSum(dynamic) no worse than WeightedSum(equal): {_verdict(ws['met'])} "
        f"{ws['detail']['mean_normalised_regret']}.",
        "",
    ]
    cross = results.get("cross_machine")
    if cross:
        lines += [
            "## Cross-machine transfer (real measurements)",
            "",
            f"{cross['description']}. The W7800 optimum is {cross['optimum']:.4g} ms (the A100's "
            f"{cross.get('source_optimum', float('nan')):.4g} ms is not a target value). TLA engines search "
            "the valid configurations only (candidates); NoTLA (MLA) gets the problem with a constraint "
            "that only stored configurations satisfy, and any suggestion outside the valid space would "
            "count as a failed evaluation.",
            "",
        ]
        lines += _scenario_lines(cross, keys)[2:]
        free = cross.get("notla_unconstrained") or {}
        if free.get("outside_valid_space"):
            lines += [
                f"Without that constraint MLA proposed {free['outside_valid_space']} configurations (per seed, "
                f"of {free['evaluations']}) outside the valid space, each a failed evaluation; its best "
                f"times were {[None if b is None else round(b, 4) for b in free['best']]} ms.",
                "",
            ]
        lines += [
            "Mean best so far relative to NoTLA's (below 1: better than NoTLA): "
            + "; ".join(
                f"{t} " + ", ".join(f"@{k} {v}" for k, v in r.items()) for t, r in cross.get("versus_notla", {}).items()
            ),
            "",
        ]
    lines += [
        f"Median ask seconds per tuner over (a)-(f): {results.get('ask_seconds_median')}.",
        "",
        f"Machine: {m.get('cpu_model')}, {m.get('cores')} cores, {m.get('os')}, Python {m.get('python')}; "
        f"load average {m.get('load_average_at_start')} at the start; {st['workers']} worker process(es).",
        "",
    ]
    return "\n".join(lines)
