"""The searcher that feeds a :class:`raytuner.schedulers.GPTuneBandScheduler` its brackets.

Get it from the scheduler, never on its own: ``band.searcher()``. It asks
the scheduler's engine for new trials (``None`` while a rung waits for
results, ``Searcher.FINISHED`` after the last pass) and reports ended trials
back, so that results the scheduler stopped are recorded too.

Example:
    >>> import tempfile
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.schedulers import GPTuneBandScheduler
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> from raytuner.engines import BanditStructure
    >>> band = GPTuneBandScheduler(ProblemSpace.parse(DEMO_PROBLEM), [{"t": 1.0}], tempfile.mkdtemp(), "demo",
    ...                   seed=0, structure=BanditStructure.hyperband(1, 4, 2))
    >>> searcher = band.searcher()
    >>> searcher.metric, searcher.mode
    ('y', 'min')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ray.tune.search import Searcher
from raytuner.searchers.common import SessionResults
from raytuner.searchers.param_space import has_samplers

from raytuner.session.tuning_session import TuningSession

__all__ = ["GPTuneBandSearcher", "BracketDriver"]


class BracketDriver(Protocol):
    """What the searcher needs of its scheduler (:class:`~raytuner.schedulers.GPTuneBandScheduler`)."""

    metric: str
    mode: str
    metrics: list[str]
    modes: list[str]
    max_concurrent: int | None

    def set_search_properties(self, metric: str | list[str] | None, mode: str | list[str] | None) -> bool:
        """Accept a Tuner-level metric/mode only when it agrees with the scheduler's.

        Args:
            metric: The Tuner's metric.
            mode: The Tuner's mode.
        """

    def results(self) -> TuningSession:
        """The scheduler's session, which holds the results."""

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """The next trial's flat config, ``None`` while waiting, ``Searcher.FINISHED`` at the end.

        Args:
            trial_id: Ray's id of the new trial.
        """

    def finish(self, trial_id: str, result: Mapping[str, Any] | None, error: bool) -> None:
        """Record a trial that ended if its evaluation is still open.

        Args:
            trial_id: Ray's trial id.
            result: The trial's last result.
            error: Whether it raised.
        """

    def save_state(self, path: str) -> None:
        """Write the scheduler's checkpoint.

        Args:
            path: The checkpoint file.
        """

    def restore_state(self, path: str) -> None:
        """Resume from the scheduler's checkpoint.

        Args:
            path: The checkpoint file.
        """


class GPTuneBandSearcher(SessionResults, Searcher):
    """Ray Tune's view of a GPTuneBand scheduler's engine (see the module docstring).

    Args:
        band: The scheduler whose brackets this searcher fills.
    """

    def __init__(self, band: BracketDriver) -> None:
        multiobjective = len(band.metrics) > 1  # Ray's searchers take lists, as OptunaSearch does
        # Ray annotates str, yet takes lists (as OptunaSearch does)
        metric: Any = band.metrics if multiobjective else band.metric
        mode: Any = band.modes if multiobjective else band.mode
        super().__init__(metric=metric, mode=mode)
        self.band = band

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any) -> bool:
        """Accept a Tuner-level metric/mode only when it agrees with the scheduler's.

        The space is the scheduler's problem: a ``param_space`` holding samplers is refused
        (Ray then says the searcher has a space already); constants pass to the trainable.
        """
        return self.band.set_search_properties(metric, mode) and not any(has_samplers(v) for v in config.values())

    def results(self) -> TuningSession:
        """The scheduler's session (:meth:`~raytuner.schedulers.GPTuneBandScheduler.results`)."""
        return self.band.results()

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Limit the evaluations in flight ourselves: paused trials waiting for their rung do not count.

        Ray's own limiter would count them and stall the rung they wait for.
        """
        self.band.max_concurrent = max_concurrent
        return True

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        """The next trial's flat config (with ``fidelity`` in one-shot mode)."""
        return self.band.suggest(trial_id)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        """Record the trial's open evaluation if the scheduler has not (an error or an early end)."""
        self.band.finish(trial_id, result, error)

    def save(self, checkpoint_path: str) -> None:
        """Save the session id and which Ray trial runs which evaluation (the ledger and store hold the rest)."""
        self.band.save_state(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        """Resume the saved session: the engine replays the store and adopts the trials in flight."""
        self.band.restore_state(checkpoint_path)
