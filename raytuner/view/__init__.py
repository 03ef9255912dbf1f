"""Read-only views of tuning histories and sessions: tables, plots and progress.

Example:
    >>> from raytuner.problem.records import FunctionEvaluation, HistoryDocument
    >>> doc = HistoryDocument(tuning_problem_name="demo", func_eval=[
    ...     FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 0.25})])
    >>> load_history(doc).best_table()["y"].tolist()
    [0.25]
"""

from raytuner.view.history import (
    DETAIL_COLUMNS,
    HistoryView,
    config_label,
    load_history,
    problem_in,
    read_history,
    task_label,
)
from raytuner.view.plots import (
    PLOTS,
    plot_brackets,
    plot_front,
    plot_history,
    plot_parameter,
    plot_sobol,
    plot_task_correlation,
    task_correlation,
)

__all__ = [
    "DETAIL_COLUMNS",
    "HistoryView",
    "load_history",
    "problem_in",
    "read_history",
    "task_label",
    "config_label",
    "PLOTS",
    "plot_history",
    "plot_parameter",
    "plot_task_correlation",
    "task_correlation",
    "plot_sobol",
    "plot_brackets",
    "plot_front",
]
