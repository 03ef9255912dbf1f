"""What the Ray Tune faces share: Ray's metric modes, asking a session in Ray's terms.

The searchers (``raytuner.searchers``) and the GPTuneBand scheduler
(``raytuner.schedulers``) import this module; it imports neither.

Example:
    >>> from raytuner.space import ProblemSpace
    >>> from raytuner.testing.functions import DEMO_PROBLEM
    >>> ray_mode(ProblemSpace.parse(DEMO_PROBLEM), None, None)
    ('y', 'min')
    >>> ray_mode(ProblemSpace.parse(DEMO_PROBLEM), None, "max")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: mode: 'max' contradicts the objective 'y', which is to minimize (allowed: min)
"""

from __future__ import annotations

import logging

from ray.tune.search import Searcher

from raytuner.errors import AwaitingResults, InfeasibleSpaceError, InvalidInputError, TuningFinished
from raytuner.session import Trial, TuningSession
from raytuner.space import ProblemSpace

__all__ = ["RAY_MODES", "ray_mode", "ask_for_ray"]

log = logging.getLogger(__name__)

#: An objective's goal as Ray Tune's ``mode``.
RAY_MODES = {"minimize": "min", "maximize": "max"}


def ray_mode(problem: ProblemSpace, metric: str | None, mode: str | None) -> tuple[str, str]:
    """The Ray ``(metric, mode)`` of ``problem``'s objective ``metric``; a contradicting ``mode`` is an error.

    Args:
        problem: The problem whose objective is tuned.
        metric: The objective's name (``None``: the first objective).
        mode: Ray's ``"min"`` or ``"max"`` as the caller gave it (``None``: from the goal).
    """
    objective = problem.objective(metric)
    expected = RAY_MODES[objective.goal]
    if mode is not None and mode != expected:
        raise InvalidInputError("mode", f"{mode!r} contradicts the objective {objective.name!r}, "
                                        f"which is to {objective.goal}", allowed=[expected])
    return objective.name, expected


def ask_for_ray(session: TuningSession, trial_id: str) -> Trial | str | None:
    """``session.ask`` in Ray's terms: the trial, ``None`` while results are awaited, or ``Searcher.FINISHED``.

    The search is finished when the engine's plan is done or no new valid
    configuration is left (a small discrete space fully explored).

    Args:
        session: The session to ask.
        trial_id: Ray's trial id (the session's trial id too).
    """
    try:
        return session.ask(trial_id=trial_id)
    except AwaitingResults:
        return None
    except (InfeasibleSpaceError, TuningFinished) as exc:
        log.info("nothing left to suggest (%s); the search is finished", exc)
        return Searcher.FINISHED
