"""What a multi-fidelity engine offers a scheduler: :class:`MultiFidelityEngine`.

A scheduler (the Ray Tune face ``raytuner.schedulers.GPTuneBandScheduler``,
or any other) drives such an engine through the session and asks it once
per trial. A suggestion whose ``provenance.parent`` is set is a promotion of
that evaluation: with ``fidelity_mode == "iterative"`` the scheduler
continues the live trial that made the parent record (else it starts a new
trial that trains from scratch up to ``suggestion.fidelity``); with
``"one_shot"`` every suggestion is a new evaluation. The engine hands out
ready promotions before new samples, so no peeking is needed:
:meth:`~MultiFidelityEngine.ready_promotions` only says whether the next ask
is a promotion (after a tell, a scheduler asks only then). Between
trials the scheduler asks :meth:`~MultiFidelityEngine.retired` whether a
paused trial can ever be continued, and reports
:meth:`~MultiFidelityEngine.progress`.

Example:
    >>> from raytuner.models.executors import InlineExecutor
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.engines import GPTuneBand, MLA
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> band = GPTuneBand(problem, [{"t": 1.0}], seed=0, b_min=1, b_max=4, eta=2, executor=InlineExecutor())
    >>> isinstance(band, MultiFidelityEngine), isinstance(MLA(problem, [{"t": 1.0}]), MultiFidelityEngine)
    (True, False)
    >>> band.structure.fidelities, band.fidelity_mode
    ((4.0, 2.0, 1.0), 'one_shot')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from raytuner.engines.bandit import BanditStructure, FidelityMode
from raytuner.engines.base import Suggestion
from raytuner.problem.records import FunctionEvaluation

__all__ = ["MultiFidelityEngine"]


@runtime_checkable
class MultiFidelityEngine(Protocol):
    """A multi-fidelity ask/tell engine, as a scheduler sees it (see the module docstring)."""

    #: The brackets' fidelities and ``b_max``.
    structure: BanditStructure
    #: ``"one_shot"`` (a promotion is a new evaluation) or ``"iterative"`` (it continues its parent).
    fidelity_mode: FidelityMode

    def ask(self, task: Mapping[str, Any] | None = None) -> Suggestion:
        """The next evaluation: a ready promotion (``provenance.parent`` set) first, else a new sample.

        Args:
            task: Restrict the choice to this task.
        """
        ...  # pragma: no cover - protocol

    def ready_promotions(self) -> int:
        """How many promotions the next asks return before any new sample (a scheduler's cue to ask now)."""
        ...  # pragma: no cover - protocol

    def progress(self) -> dict[str, Any]:
        """Where the run stands (pass, stage, evaluations told and in flight, cost), for reports."""
        ...  # pragma: no cover - protocol

    def retired(self, uid: str) -> bool:
        """Whether evaluation ``uid`` will never be continued (a paused trial that made it can stop).

        Args:
            uid: The evaluation's uid.
        """
        ...  # pragma: no cover - protocol

    def best_per_task(self, objective: str | None = None) -> list[FunctionEvaluation | None]:
        """Per task, the best successful evaluation at ``b_max`` (``None`` where there is none).

        Args:
            objective: The objective's name (default: the one the engine tunes).
        """
        ...  # pragma: no cover - protocol
