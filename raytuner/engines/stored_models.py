"""How a model-based engine takes back its stored surrogate models: the warm start, or the model as it is.

:class:`StoredModels` is a mixin of :class:`~raytuner.engines.MLA`: it
reads the engine's ``problem``, ``tasks``, ``name``, ``objective``,
``model``, ``_chosen_columns`` and ``_records``, and sets the warm start (``_warm``, with the
samples it was optimised on, ``_warm_optimised``), the model to reuse as it
is when its data are the same (``_restored``) and a fixed model
(``_fixed``, GPTune's ``load_surrogate_model``).

A stored model of the engine's own sampler and tasks comes first. Without
one, the last model of another sampler that may start it (one of
GPTuneBand's earlier passes or stages) does, each task taking the
hyperparameters of a task of that model (:meth:`~StoredModels.warm_rows`),
so that a new sampler's first fit is a short warm one, not a cold one; a
model with another number of latent functions is passed over.

Example:
    >>> from raytuner.models import Hyperparameters
    >>> hp = Hyperparameters.initial(latent=1, tasks=2, dimension=1, rank=1)
    >>> hp.kappa[0, 1] = 0.25
    >>> hp.for_tasks([1, 1, 0]).kappa.tolist()
    [[0.25, 0.25, 0.5]]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from raytuner.errors import InvalidInputError
from raytuner.models import LCM, FittedLCM, Hyperparameters
from raytuner.models.persistence import load_surrogate, model_tasks, own_model
from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord

if TYPE_CHECKING:
    from raytuner.problem.space import Objective, ProblemSpace

__all__ = ["StoredModels"]

log = logging.getLogger(__name__)


class StoredModels:
    """Take back stored surrogate models (a mixin of model-based engines; see the module docstring)."""

    _warm: Hyperparameters | None
    _warm_optimised: int | None
    _restored: SurrogateModelRecord | None
    _fixed: Hyperparameters | None
    _chosen_columns: bool
    model: LCM
    # what the engine it is mixed into sets (see the module docstring)
    problem: ProblemSpace
    tasks: list[dict[str, Any]]
    name: str
    objective: Objective
    _records: list[FunctionEvaluation]

    def sampler(self) -> dict[str, int | bool] | None:
        """Which of an engine's samplers this is, stored with its models (``None``: the engine's only one).

        GPTuneBand builds one per pass and sampling stage (and, with alternating sources, a plain twin).
        """
        return None

    def warm_rows(self, record: SurrogateModelRecord, sampler: Mapping[str, Any] | None) -> list[int] | None:
        """For each of this engine's tasks, the task of another sampler's model whose hyperparameters start it.

        ``None`` (always, by default) when that model may not warm-start this engine. GPTuneBand's sampler of
        a later pass or stage starts from an earlier one's model of the same run.

        Args:
            record: The other sampler's model.
            sampler: Its sampler (:meth:`sampler`).
        """
        return None

    def _task_values(self) -> list[list[Any]]:
        names = self.problem.input_space.names
        return [[t[n] for n in names] for t in self.tasks]

    def restore_models(self, models: Sequence[SurrogateModelRecord], fixed: bool = False) -> None:
        """Warm-start from the last stored model of this modeler, tasks and :meth:`sampler` (or use it as it is).

        Without a model of its own sampler, the last one of another sampler it :meth:`warm_rows` maps is the start.

        Args:
            models: The stored surrogate-model records, oldest first.
            fixed: Use that model's hyperparameters as they are: every later model is conditioned
                on them, never fitted (GPTune's ``load_surrogate_model``).
        """
        mine = self._task_values()
        candidates = [
            (record, own)
            for record in reversed(models)
            if (own := own_model(record)) is not None
            and own["modeler"] == self.modeler
            and own.get("objective") in (None, self.objective.name)
        ]
        # several outputs: this output's model; as it is: any sampler's; a warm start: this sampler's first
        if any(
            self._adopt_model(record, own, fixed)
            for record, own in candidates
            if model_tasks(record) == mine and (fixed or own.get("sampler") == self.sampler())
        ):
            return
        if not fixed and any(
            self._adopt_model(record, own, False, rows)
            for record, own in candidates
            if (rows := self.warm_rows(record, own.get("sampler"))) is not None
        ):
            return
        if fixed:
            log.warning("load_surrogate_model: no stored model of %s for these tasks; fitting one", self.modeler)

    def _adopt_model(
        self, record: SurrogateModelRecord, own: Mapping[str, Any], fixed: bool, rows: list[int] | None = None
    ) -> bool:
        """Take ``record``'s hyperparameters (over ``rows`` of its tasks) as the warm start, or as fixed.

        ``False`` when they cannot be read. Only a model of the engine's own tasks may be reused as it is.
        """
        try:
            warm = Hyperparameters.from_dict(own["hyperparameters"] or {})
            if rows is not None:
                warm = warm.for_tasks(rows)
        except (InvalidInputError, IndexError):
            return False
        latent, _, _, rank = warm.shape
        if rows is not None and (latent, rank) != (self.model.options.latent_for(len(rows)), self.model.options.rank):
            return False  # another number of latent functions (fewer tasks): an older model may fit
        self._warm = warm
        optimised = (own.get("fit") or {}).get("optimised_samples")
        # another sampler's model was optimised on other data: only a start, always optimised again
        self._warm_optimised = optimised if isinstance(optimised, int) and rows is None else None
        self._restored = record if rows is None else None
        self._fixed = self._warm if fixed else None
        stored = tuple(record.modeling_options.get("categorical") or ())
        if stored != self.model.options.categorical_columns and not self._chosen_columns:
            self._adopt_columns(stored)
        if stored != self.model.options.categorical_columns:
            # its length scales measure other distances: a warm start to re-optimise, never used as is
            log.warning(
                "the stored model of %s compares categorical columns %s, this engine %s: fitting again from it",
                self.modeler,
                list(stored),
                list(self.model.options.categorical_columns),
            )
            self._warm_optimised, self._restored, self._fixed = None, None, None
        nonnegative = record.modeling_options.get("task_weights") == "nonnegative"  # older models: signed
        if warm.shape[1] > 1 and nonnegative != self.model.options.nonnegative(warm.shape[1]):
            # weights of another sign than this engine's: a warm start (clipped to its bounds) to re-optimise
            log.warning(
                "the stored model of %s has %s task weights, this engine %s: fitting again from it",
                self.modeler,
                "nonnegative" if nonnegative else "signed",
                self.model.options.task_weights,
            )
            self._warm_optimised, self._restored, self._fixed = None, None, None
        return True

    def _stored_fit(self, uids: list[str], horizon: int) -> FittedLCM | None:
        """The restored model when it was fitted to exactly this data (a resumed run does not refit)."""
        record, self._restored = self._restored, None
        if record is None or list(record.function_evaluations) != uids:
            return None
        try:
            return load_surrogate(record, self._records[:horizon])
        except InvalidInputError:
            return None

    def _adopt_columns(self, stored: tuple[int, ...]) -> None:
        """Compare categorical columns as a stored model did (say, one fitted before ordinals), none being asked for."""
        try:
            self.model = LCM(replace(self.model.options, categorical=stored).over(self.problem.parameter_space))
        except InvalidInputError:  # columns that are not categorical parameters here: fit again
            return
        log.info("%s compares the categorical columns %s, as its stored model does", self.modeler, list(stored))

    @property
    def modeler(self) -> str:
        """The name written into this engine's surrogate-model records."""
        return f"{self.model.name}:{self.name}"
