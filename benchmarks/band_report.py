"""The band benchmark's report (:mod:`benchmarks.band`): the markdown summary and the history plots.

:func:`render_report` turns ``results.json``'s contents into ``report.md``;
it reads nothing but ``results``, so a report can be rendered again from a
saved run::

    results = json.loads(Path("bench_out/band/results.json").read_text())
    text = render_report(results)        # the same text as bench_out/band/report.md

The goal thresholds live here, where both the results
(:func:`~benchmarks.band.row_results`) and the report's wording read them,
and so do the goals over the whole run (:func:`goals`, :func:`all_goals`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.gptune_peer import render_section
from benchmarks.report import markdown_table, save_history_plot

__all__ = [
    "REFERENCE",
    "MLA",
    "GOAL_R_BAR",
    "GOAL_WIN_RATE_BOHB",
    "GOAL_LONGEST_ASK_S",
    "GOAL_WORST_MARGIN",
    "goals",
    "all_goals",
    "render_report",
    "save_plot",
]

REFERENCE = "GPTuneBand"
#: Table 1's row of raytuner's own MLA (GPTune's single-fidelity method).
MLA = "GPTune"
GOAL_R_BAR = 1.02
GOAL_WIN_RATE_BOHB = 0.8
#: GPTuneBand's longest ``ask`` on LCBench must stay under this many seconds.
GOAL_LONGEST_ASK_S = 5.0
#: No task's mean best accuracy under GPTuneBand may be more than this many points under single-task BO's.
GOAL_WORST_MARGIN = -0.5


def _all_measured(flags: Iterable[bool | None]) -> bool | None:
    """Whether every measured flag holds (``None`` ones were not measured; ``None`` when none was)."""
    measured = [flag for flag in flags if flag is not None]
    return all(measured) if measured else None


def _every(rows: Sequence[Mapping[str, Any]], key: str) -> bool | None:
    """Whether the row goal ``key`` holds in every row that measured it (``None``: none did)."""
    return _all_measured(row["goals"].get(key) for row in rows)


def goals(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool | None]:
    """Each Table-1 goal over all rows run (``None`` where nothing was measured): ``results["table1"]["goals"]``.

    Args:
        rows: the rows' results, as :func:`~benchmarks.band.row_results` returns them (each with its
            ``"goals"``).

    >>> flags = {"lowest_R_bar": True, "R_bar_le_1.02": False, "win_rate_vs_BOHB_ge_0.8": None}
    >>> list(goals([{"goals": flags}, {"goals": {**flags, "R_bar_le_1.02": True}}]).values())
    [True, False, None]
    """
    return {
        "GPTuneBand_lowest_R_bar_every_row": _every(rows, "lowest_R_bar"),
        "GPTuneBand_R_bar_le_1.02_every_row": _every(rows, "R_bar_le_1.02"),
        "GPTuneBand_win_rate_vs_BOHB_ge_0.8_every_row": _every(rows, "win_rate_vs_BOHB_ge_0.8"),
    }


def _every_budget(lcbench: Sequence[Mapping[str, Any]], key: str) -> bool | None:
    """Whether the LCBench goal ``key`` holds at every budget that measured it (``None``: none did)."""
    return _all_measured(lc.get(key) for lc in lcbench)


def all_goals(rows: Sequence[Mapping[str, Any]], lcbench: Sequence[Mapping[str, Any]] = ()) -> dict[str, bool | None]:
    """The run's goals, ``results["goals"]``: Table 1's (:func:`goals`, and the same three under issue 19's
    names, the lowest R-bar one judged only where raytuner's MLA ran) and LCBench's at every budget (``None``
    where not measured).

    Args:
        rows: the Table-1 rows' results (each with its ``"goals"``).
        lcbench: ``results["lcbench_budgets"]`` and ``results["lcbench_validation"]``, one result per task set and
            budget (default none: LCBench did not run).

    >>> flags = {"lowest_R_bar": True, "lowest_R_bar_incl_mla": True, "R_bar_le_1.02": False,
    ...          "win_rate_vs_BOHB_ge_0.8": True}
    >>> lc = {"goal_best_mean_rank": True, "goal_lowest_R_bar": True, "goal_longest_ask_lt_5s": False}
    >>> g = all_goals([{"goals": flags}], [lc, {**lc, "goal_lowest_R_bar": False}])
    >>> [g[k] for k in ("lowest_R_bar_every_row_incl_mla", "R_bar_le_1.02_every_row", "lcbench_best_mean_rank",
    ...                 "lcbench_lowest_R_bar", "lcbench_longest_ask_lt_5s")]
    [True, False, True, False, False]
    >>> all_goals([])["lcbench_best_mean_rank"] is None and all_goals([])["R_bar_le_1.02_every_row"] is None
    True
    """
    table = goals(rows)
    return {
        **table,
        "lowest_R_bar_every_row_incl_mla": _every(rows, "lowest_R_bar_incl_mla"),
        "R_bar_le_1.02_every_row": table["GPTuneBand_R_bar_le_1.02_every_row"],
        "win_rate_vs_BOHB_ge_0.8_every_row": table["GPTuneBand_win_rate_vs_BOHB_ge_0.8_every_row"],
        "lcbench_best_mean_rank": _every_budget(lcbench, "goal_best_mean_rank"),
        "lcbench_lowest_R_bar": _every_budget(lcbench, "goal_lowest_R_bar"),
        "lcbench_longest_ask_lt_5s": _every_budget(lcbench, "goal_longest_ask_lt_5s"),
        "lcbench_no_negative_transfer": _every_budget(lcbench, "goal_no_negative_transfer"),
        "lcbench_no_negative_transfer_beyond_noise": _every_budget(lcbench, "goal_no_negative_transfer_beyond_noise"),
    }


def save_plot(history: Mapping[str, Any], path: Path, title: str, ylabel: str) -> bool:
    """Plot ``history``'s best-so-far curves (one line per tuner) against its normalised cost.

    ``history`` is ``{"cost": grid, "curves": {tuner: values}}`` as
    :func:`~benchmarks.band.run_row` returns it; ``False`` (with a warning)
    without matplotlib.

    Args:
        history: the cost grid and the curves per tuner.
        path: the PNG to write.
        title: the plot's title.
        ylabel: the y axis's label.

    >>> import tempfile
    >>> history = {"cost": [0.0, 7.5, 15.0], "curves": {"GPTuneBand": [None, 1.1, 1.0], "random": [1.4, 1.2, 1.1]}}
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     png = Path(folder) / "band_row1.png"
    ...     save_plot(history, png, "Table 1 row 1", "best y at b_max / grid minimum") == png.is_file()
    True
    """
    return save_history_plot(
        history["curves"],
        path,
        "normalised cost per task (evaluation at b costs b / b_max)",
        ylabel,
        title,
        x=history["cost"],
        style={"linewidth": 1.5},
        legend_fontsize=8,
    )


def _verdict(flag: bool | None) -> str:
    return "not measured" if flag is None else "met" if flag else "**missed**"


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _table1_lines(table1: Mapping[str, Any]) -> list[str]:
    lines = []
    for row in table1["rows"]:
        names = list(row["R_bar"])
        table = markdown_table(
            ["tuner", "R-bar (ours)", "R-bar (paper)", "GPTuneBand wins vs", "median wall s per repeat"],
            [
                [
                    n,
                    row["R_bar"][n],
                    _cell(row["paper_R_bar"].get(n)),
                    _cell(row["win_rate_vs"].get(n)),
                    row["wall_seconds_median"].get(n),
                ]
                for n in names
            ],
        )
        lines += [
            f"### Row {row['id']}: t in {row['task_range']}, structure {row['structure']}",
            "",
            f"{row['repeats']} repeats x {row['tasks_per_repeat']} tasks; budget C = {row['cost_per_task']:g} "
            f"per task ({row['evaluations_per_task_at_b_max']} evaluations at b_max for GPTune, TPE, random).",
            "",
            table,
            "",
        ]
        if row.get("plot"):
            lines += [f"![tuning history, row {row['id']}]({row['plot']})", ""]
        lines += [
            f"- GPTuneBand lowest R-bar: {_verdict(row['goals']['lowest_R_bar'])} ({MLA}, our MLA, among the others: "
            f"{_verdict(row['goals'].get('lowest_R_bar_incl_mla'))}); R-bar <= {GOAL_R_BAR}: "
            f"{_verdict(row['goals']['R_bar_le_1.02'])}; win rate vs BOHB >= {GOAL_WIN_RATE_BOHB}: "
            f"{_verdict(row['goals']['win_rate_vs_BOHB_ge_0.8'])}",
            "",
        ]
        lines += [f"- note: {n}" for n in row["notes"][:10]] + ([""] if row["notes"] else [])
    return lines


def _lcbench_lines(lc: Mapping[str, Any]) -> list[str]:
    margins = lc.get("margins_vs_single_task_bo") or {}
    table = markdown_table(
        [
            "tuner",
            "mean rank",
            "R-bar",
            "worst task's margin to single-task BO",
            "worst margin + 2 se",
            "median wall s per repeat",
        ],
        [
            [
                n,
                lc["mean_rank"][n],
                lc["R_bar"][n],
                f"{margins[n]['worst']} ({margins[n]['worst_task']})" if n in margins else "-",
                f"{margins[n]['worst_upper']} ({margins[n]['worst_upper_task']})" if n in margins else "-",
                lc["wall_seconds_median"].get(n),
            ]
            for n in lc["mean_rank"]
        ],
    )
    longest = lc.get("longest_ask_seconds")
    lines = [
        f"## LCBench (YAHPO surrogate), the {lc.get('set', 'tuning')} set, budget {lc['budget_per_task']:g}",
        "",
        f"Tasks {lc['tasks']} (OpenML ids), structure {lc['structure']} in whole epochs (fidelities "
        f"{lc['fidelities']}), iterative fidelity: a promotion continues from its checkpoint and pays only the "
        f"extra epochs. Budget per task: {lc['budget_per_task']:g} (epochs trained / 52), "
        f'{lc["passes"]} x cost_per_pass("iterative"); GPTuneBand runs over all tasks at once, as many passes as '
        f"the budget pays for (the last cut where its next step no longer fits), each Ray tuner one tune.run per "
        f"task stopped at the budget, SMAC (MultiFidelityFacade, Hyperband) one run per task stopped at the "
        f"budget; TPE and GPSampler (Optuna), SMAC-HPO (SMAC3's HyperparameterOptimizationFacade) and random "
        f"search floor(budget) evaluations at epoch 52 per task. {lc['repeats']} repeat(s). "
        "Rank 1 = highest val_accuracy at epoch 52 in the (repeat, task) cell, ties share the average rank. "
        "R-tilde = best accuracy of all tuners / the tuner's (maximisation; 1 is best), R-bar = (mean + median) "
        "/ 2 of R-tilde. Margin: the tuner's mean best accuracy on a task minus single-task BO's (raytuner's BO "
        "of the task alone), in points; the worst task's, with its id; + 2 se: the least of margin plus two "
        "standard errors of the difference of the means (under -0.5 there: worse than alone beyond the noise).",
        "",
        table,
        "",
    ]
    if lc.get("plot"):
        lines += [f"![tuning history, LCBench]({lc['plot']})", ""]
    ranks = lc["mean_rank"]
    tied = [n for n in ranks if n != REFERENCE and ranks[n] == ranks.get(REFERENCE)]
    lines += [
        f"- GPTuneBand has the best mean rank: {_verdict(lc['goal_best_mean_rank'])}"
        f"{' (tied with ' + ', '.join(tied) + ')' if tied and lc['goal_best_mean_rank'] else ''}",
        f"- GPTuneBand has the lowest R-bar: {_verdict(lc.get('goal_lowest_R_bar'))}",
        f"- No task's mean best under GPTuneBand (either fidelity mode) more than {-GOAL_WORST_MARGIN:g} points "
        f"under single-task BO's: {_verdict(lc.get('goal_no_negative_transfer'))}; beyond the seeds' noise "
        f"(margin + 2 standard errors): {_verdict(lc.get('goal_no_negative_transfer_beyond_noise'))}; single-task "
        f"BO's worst margin against itself (halves of its seeds): {lc.get('noise_floor_single_task_bo')}",
        f"- GPTuneBand's longest ask < {GOAL_LONGEST_ASK_S:g} s: {_verdict(lc.get('goal_longest_ask_lt_5s'))}"
        + (
            ""
            if longest is None
            else f" (longest {longest} s, median {lc.get('ask_seconds_median')} s over "
            f"{lc.get('asks')} asks, fits on {lc.get('ask_executor', 'the default executor')})"
        ),
    ]
    lines += [f"- skipped (not installed): {', '.join(lc['skipped'])}"] if lc.get("skipped") else []
    lines += [""]
    lines += [f"- note: {n}" for n in lc["notes"][:10]] + ([""] if lc["notes"] else [])
    return lines


def render_report(results: Mapping[str, Any]) -> str:
    """The human summary: Table 1 beside the paper's, LCBench, the goals, what is approximate, the machine.

    Args:
        results: the benchmark's results (``table1``, ``lcbench`` or ``lcbench_budgets``, ``quick``, ``machine``,
            ``command``).

    >>> import numpy as np
    >>> from benchmarks.band import TABLE1, goals, lcbench_results, row_results
    >>> finals = {"GPTuneBand": np.ones((1, 2)), "BOHB": np.full((1, 2), 1.1)}
    >>> row = row_results(TABLE1[0], finals, {"GPTuneBand": [2.0], "BOHB": [3.0]})
    >>> lc = lcbench_results([3945], 12.7, {"GPTuneBand": np.array([[90.0]])}, {"GPTuneBand": [1.0]})
    >>> text = render_report({"table1": {"rows": [row], "goals": goals([row])}, "lcbench": lc, "quick": True,
    ...                       "machine": {}, "command": "python -m benchmarks band --out out --quick"})
    >>> text.splitlines()[0]
    '# Band benchmark: GPTuneBand vs BOHB, HB, GPTune, TPE, random (quick)'
    """
    t1, m = results["table1"], results["machine"]
    lcbench = [*(results.get("lcbench_budgets") or [results["lcbench"]]), *results.get("lcbench_validation", [])]
    g = results.get("goals") or all_goals(t1["rows"], lcbench)
    lines = [
        f"# Band benchmark: GPTuneBand vs BOHB, HB, GPTune, TPE, random{' (quick)' if results['quick'] else ''}",
        "",
        f"Command: `{results['command']}`. Elapsed {results.get('elapsed_s')} s.",
        "",
    ]
    if results["quick"]:
        lines += [
            "Quick run: Table-1 row 1 only with 2 repeats, LCBench on 2 tasks, 1 repeat, one pass of budget. "
            "The figures are indicative; the goals are judged on the full run.",
            "",
        ]
    lines += [
        "## Table 1 (demo function, paper 004 section 5.1)",
        "",
        "y(x, t) minimised over x in [0, 1]; observed at fidelity b as y (1 + 0.1 cos(2 pi x)(1 - b/b_max)). "
        "Each tuner's answer on a task is the true y at the configuration it picks at b_max. R-tilde = answer / "
        "best answer of all tuners in the (repeat, task) cell; R-bar = (mean + median) / 2 of R-tilde, 1 is "
        "best. Win rate: share of cells where GPTuneBand's answer is strictly lower (ties count half). The "
        "paper's column is from its Table 1 (hpbandster BOHB, GPTune, hyperopt TPE on Cori).",
        "",
    ]
    lines += _table1_lines(t1)
    lines += [
        "Goals over all rows run:",
        "",
        f"- GPTuneBand has the lowest R-bar in every row: {_verdict(g['GPTuneBand_lowest_R_bar_every_row'])}",
        f"- GPTuneBand R-bar <= {GOAL_R_BAR} in every row: {_verdict(g['GPTuneBand_R_bar_le_1.02_every_row'])}",
        f"- GPTuneBand wins >= {GOAL_WIN_RATE_BOHB:.0%} of the cells against BOHB in every row: "
        f"{_verdict(g['GPTuneBand_win_rate_vs_BOHB_ge_0.8_every_row'])}",
        f"- GPTuneBand has the lowest R-bar in every row, {MLA} (raytuner's MLA) and GPTuneBand-paper among "
        f"the others (judged where {MLA} ran): {_verdict(g['lowest_R_bar_every_row_incl_mla'])}",
        "",
    ]
    for lc in lcbench:
        lines += _lcbench_lines(lc)
    lines += render_section(results.get("gptune"))
    lines += [
        "## What is approximate",
        "",
        "- BOHB and HB are Ray Tune's (TuneBOHB + HyperBandForBOHB, HyperBandScheduler), not hpbandster's "
        "master/worker. Ray's Hyperband runs its brackets from the full-fidelity one down, sizes them with "
        "ceil(s_max+1 / (s+1) eta^s) and milestones floor(max_t eta^-s) eta^k capped at max_t, so its brackets "
        "differ from the paper's (for max_t = 52, eta = 3 the last rungs end at 51, 45 and 27 epochs; we pass "
        "stop_last_trials=False so that each bracket's survivors train on to epoch 52, as the paper's last "
        "rung does). BOHB and ASHA run 2 trials at a time; HB runs without a concurrency limit (a Ray "
        "Hyperband bracket must hold all its trials at once), the 2 CPUs bound it.",
        "- The Ray trainables report only at the fidelities where the scheduler decides (Ray's milestones, "
        "and b_max), with the scheduler's time_attr set to the reported fidelity: the decisions are those of "
        "per-iteration reporting, for a fraction of Ray's per-report overhead. A task's run stops at the "
        "first report that would overrun its budget, so Ray's tuners may spend up to one report's increment "
        "less than C.",
        "- Demo cost accounting: the Ray trainable has no checkpoints, so a trial Hyperband pauses and resumes "
        "starts again from 0 and an evaluation at b pays b/b_max again (the paper's one-shot accounting). Only "
        "trials that reached b_max give an answer (a note says when none did).",
        "- GPTune in Table 1 is raytuner's MLA (LCM + EI, refitted once per round; GPTune's own code is compared "
        "in its own section, with --gptune), TPE is Optuna's (half the "
        "evaluations random startup), not hyperopt's; OpenTuner is not compared. GPTuneBand-paper is the same "
        "engine with model=\"paper\" (the paper's GPTuneBand model); GPTuneBand runs the engine's default "
        "model.",
        "- LCBench's SMAC is SMAC3's MultiFidelityFacade (random forest, Hyperband intensifier, "
        "deterministic=True), asked and told in process; min_budget = 52 / 27 and max_budget = 52 give it the "
        "structure's four brackets, its budgets 1.93, 5.78, 17.3, 52 are rounded to whole epochs (2, 6, 17, 52) "
        "and a promoted configuration pays only its extra epochs, as for the Ray tuners. SMAC's choices also "
        "depend on Python's string hashing: without a fixed PYTHONHASHSEED two runs differ. LCBench's TPE "
        "evaluates at epoch 52 only.",
        "- GPTuneBand's model fits run inline (InlineExecutor): on this 2-core machine it was faster than the "
        "process pool (row 1, 10 tasks: 9.1 s vs 10.5 s) and is deterministic.",
        "- LCBench is YAHPO Gym's ONNX surrogate of the learning curves, not real training; the time output is "
        "not used, every tuner is charged epochs / 52.",
        "",
        f"Machine: {m.get('cpu_model')}, {m.get('cores')} cores, {m.get('os')}, Python {m.get('python')}; load "
        f"average {m.get('load_average_at_start')} at the start (other work on the machine slows Ray's "
        "per-report overhead most).",
        "",
    ]
    return "\n".join(lines)
