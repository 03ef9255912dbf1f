"""A Ray Tune callback that shows a raytuner run's progress per task, and GPTuneBand's pass and stage.

Pass it the searcher or the GPTuneBand scheduler of the run; every ``every``
seconds (on a trial's result or end) and once at the end it writes a table
(with ``tables=False``, only a line when GPTuneBand's pass or stage changes, and
the table at the end):
per task the evaluations, failures, normalised cost and best so far (at full
fidelity), and for GPTuneBand the pass, bracket and rung of the task's latest
evaluation, under a line with the plan's pass and stage. The table goes to
``stream`` (standard output by default) or, with ``stream=None``, to the
``raytuner.searchers.progress`` logger at INFO. Each session also logs one line per
evaluation at INFO on ``raytuner.session.tuning_session``.

Example::

    band = GPTuneBandScheduler(
        problem, tasks, "raytuner_results", "demo", structure=BanditStructure.hyperband(1, 27, 3)
    )
    tune.run(trainable, search_alg=band.searcher(), scheduler=band, num_samples=-1,
             callbacks=[TuningProgress(band)])
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, TextIO

from ray import tune

from raytuner.errors import InvalidInputError

__all__ = ["TuningProgress"]

log = logging.getLogger(__name__)


class TuningProgress(tune.Callback):
    """Progress per task of the run a raytuner searcher or the GPTuneBand scheduler drives.

    Args:
        tuner: the run's raytuner searcher (any with a ``session``) or ``GPTuneBandScheduler``.
        every: the least seconds between two tables (the last one is always written).
        stream: where to write the table (default standard output; ``None``: the
            ``raytuner.searchers.progress`` logger at INFO).
        tables: write the table every ``every`` seconds (default); ``False``: only the heading line when
            GPTuneBand's pass or stage changes, and the table at the end.

    >>> from raytuner.searchers import RandomSearcher
    >>> from raytuner.store import JsonStore
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> import io, tempfile
    >>> searcher = RandomSearcher(ProblemSpace.parse(DEMO_PROBLEM), [{"t": 1.0}], JsonStore(tempfile.mkdtemp()),
    ...                           "demo", metric="y", mode="min")
    >>> out = io.StringIO()
    >>> TuningProgress(searcher, stream=out).write()
    >>> out.getvalue().splitlines()[0]
    'demo: 0 evaluations'
    """

    def __init__(self, tuner: Any, every: float = 5.0, stream: TextIO | None = sys.stdout, tables: bool = True) -> None:
        if getattr(tuner, "session", None) is None:
            raise InvalidInputError(
                "tuner",
                f"{type(tuner).__name__} has no tuning session",
                allowed=["a raytuner searcher", "GPTuneBandScheduler"],
            )
        if isinstance(every, bool) or not isinstance(every, (int, float)) or every < 0:
            raise InvalidInputError("every", f"{every!r} is not a number of seconds", allowed=[">= 0"])
        self.tuner, self.every, self.stream, self.tables = tuner, float(every), stream, bool(tables)
        self._last = -float("inf")
        self._stage: tuple[Any, ...] | None = None

    def lines(self) -> list[str]:
        """The table: a heading line (with GPTuneBand's plan when there is one), then one row per task."""
        session = self.tuner.session
        heading = f"{session.problem_name}: {len(session.records)} evaluations"
        engine = getattr(self.tuner, "engine", None)
        if engine is not None and hasattr(engine, "progress"):
            p = engine.progress()
            passes = f"{p['pass']}/{p['passes']}" if p["passes"] is not None else f"{p['pass']}"
            stage = "done" if p["finished"] else f"stage {p['stage']}"
            heading += (
                f"; GPTuneBand pass {passes}, {stage}, {p['in_flight']} in flight, "
                f"{p['tasks_finished']} of {len(engine.tasks)} tasks finished"
            )
        return [heading, *(session.progress.table() if session.records else [])]

    def write(self) -> None:
        """Write the table now."""
        self._emit("\n".join(self.lines()))

    def _emit(self, text: str) -> None:
        if self.stream is None:
            log.info("%s", text)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()
        self._last = time.monotonic()

    def _maybe_write(self) -> None:
        if self.tables:
            if time.monotonic() - self._last >= self.every:
                self.write()
            return
        engine = getattr(self.tuner, "engine", None)
        if engine is None or not hasattr(engine, "progress"):
            return
        p = engine.progress()
        stage = (p["pass"], p["stage"], p["finished"])
        if stage != self._stage and not p["finished"]:  # the table at the end says "done", once
            self._stage = stage
            self._emit(self.lines()[0])

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        self._maybe_write()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._maybe_write()

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.write()
