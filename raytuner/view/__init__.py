"""Read-only views of tuning histories and sessions: tables, plots and progress.

Example:
    >>> from raytuner.problem.records import FunctionEvaluation, HistoryDocument
    >>> doc = HistoryDocument(tuning_problem_name="demo", func_eval=[
    ...     FunctionEvaluation.create({"t": 1.0}, {"x": 0.5}, {"y": 0.25})])
    >>> load_history(doc).best_table()["y"].tolist()
    [0.25]
"""

from raytuner.view import history, plots
from raytuner.view.history import *  # noqa: F403 - the names of history.__all__
from raytuner.view.plots import *  # noqa: F403 - the names of plots.__all__

__all__ = history.__all__ + plots.__all__
