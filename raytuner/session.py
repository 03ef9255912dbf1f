"""A tuning session: one strategy wired to one history store.

Every ``tell`` is persisted (durably) before it is acknowledged, and then
folded into the strategy; :meth:`TuningSession.resume` rebuilds a session by
replaying the problem's evaluations from the store. Ray searchers, the gRPC
service and the CLI are thin faces over this class.

Example:
    >>> import tempfile
    >>> from raytuner.space import ProblemSpace
    >>> from raytuner.store import JsonStore
    >>> from raytuner.strategies import RandomSearch
    >>> problem = ProblemSpace.parse({
    ...     "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 10}],
    ...     "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}]})
    >>> store = JsonStore(tempfile.mkdtemp())
    >>> session = TuningSession("demo", problem, RandomSearch(problem, [{"t": 1.0}], seed=0), store)
    >>> trial = session.ask()
    >>> record = session.tell(trial, {"y": trial.config["x"] ** 2})
    >>> [r.uid for r in store.evaluations("demo")] == [record.uid]
    True
    >>> session.best({"t": 1.0}).uid == record.uid
    True
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from raytuner.environment import machine_configuration, software_configuration
from raytuner.errors import InvalidInputError
from raytuner.records import FunctionEvaluation, Provenance, check_problem_name
from raytuner.space import ProblemSpace
from raytuner.store.base import HistoryStore
from raytuner.strategies.base import Strategy, Suggestion, fitting_records, task_key

__all__ = ["TuningSession", "Trial"]

log = logging.getLogger(__name__)


@dataclass
class Trial(Suggestion):
    """A suggestion handed out by a session, with its trial id."""

    trial_id: str = ""


class TuningSession:
    """Ask/tell over a strategy, persisting every result before acknowledging it.

    ``machine`` and ``software`` are user-given configuration values; they
    win over what is captured automatically. ``software_packages`` names extra
    packages whose versions each record carries.
    """

    def __init__(
        self,
        problem_name: str,
        problem: ProblemSpace,
        strategy: Strategy,
        store: HistoryStore,
        *,
        machine: Mapping[str, Any] | None = None,
        software: Mapping[str, Any] | None = None,
        software_packages: tuple[str, ...] = (),
        session_id: str | None = None,
    ) -> None:
        self.problem_name = check_problem_name(problem_name)
        self.problem = problem
        self.strategy = strategy
        self.store = store
        self.session_id = session_id or uuid.uuid4().hex
        self.machine_configuration = machine_configuration(machine)
        self.software_configuration = software_configuration(software_packages, software)
        self._pending: dict[str, Trial] = {}
        self._records: list[FunctionEvaluation] = []

    @classmethod
    def resume(cls, problem_name: str, problem: ProblemSpace, strategy: Strategy, store: HistoryStore,
               *, session_only: bool = False, **kwargs: Any) -> "TuningSession":
        """A session whose strategy has replayed every stored evaluation of its tasks.

        With ``session_only`` (and a ``session_id``), only the evaluations this
        session made are replayed, not other runs' evaluations of the same tasks.
        Stored evaluations that do not fit ``problem`` (another version of
        the problem wrote them) are skipped with one warning that counts them.

        Args:
            problem_name: The problem's name in the store.
            problem: The problem's spaces.
            strategy: A fresh engine, to be rebuilt from the store.
            store: The history store.
            session_only: Replay only this session's own evaluations.
            **kwargs: The session's options (``session_id``, ``machine``, ...).
        """
        session = cls(problem_name, problem, strategy, store, **kwargs)
        keys = {task_key(t) for t in strategy.tasks}
        records = [r for r in store.evaluations(problem_name) if task_key(r.task_parameter) in keys
                   and (not session_only or (r.raytuner is not None and r.raytuner.session_id == session.session_id))]
        records = fitting_records(problem, records, f"stored {problem_name}")
        session._records = records
        strategy.replay(records)
        strategy.restore_models(store.models(problem_name))
        log.info("resumed %s: replayed %d evaluations", problem_name, len(records))
        return session

    @property
    def records(self) -> list[FunctionEvaluation]:
        """The evaluations of this session's tasks, oldest first (replayed ones included)."""
        return list(self._records)

    @property
    def pending(self) -> dict[str, Trial]:
        """Trials handed out and not yet told, by trial id."""
        return dict(self._pending)

    def ask(self, task: Mapping[str, Any] | None = None, trial_id: str | None = None) -> Trial:
        """The next trial to run (for ``task`` when given)."""
        suggestion = self.strategy.ask(task)
        for model in self.strategy.take_models():
            self.store.append_model(self.problem_name, model)
        trial_id = trial_id or uuid.uuid4().hex
        provenance = suggestion.provenance.model_copy(update={"trial_id": trial_id,
                                                              "session_id": self.session_id})
        trial = Trial(task=suggestion.task, config=suggestion.config, provenance=provenance, trial_id=trial_id)
        self._pending[trial_id] = trial
        return trial

    def adopt(self, trial: Trial) -> None:
        """Take back a trial handed out before a restart, so that its result is recorded.

        The strategy counts it as pending again; telling it later works as
        for a trial this session asked.
        """
        if trial.trial_id in self._pending:
            return
        self.problem.check(trial.task, trial.config)
        self.strategy.add_pending(trial.task, trial.config, trial.provenance)
        self._pending[trial.trial_id] = trial

    def tell(self, trial: Trial | str, result: Mapping[str, Any] | None = None, *,
             failure: str | None = None, additional_output: Mapping[str, Any] | None = None,
             provenance: Mapping[str, Any] | None = None, machine: Mapping[str, Any] | None = None,
             software: Mapping[str, Any] | None = None) -> FunctionEvaluation:
        """Record a trial's outputs (or its failure); durable when this returns.

        A failure message, a missing output or a value that is not a finite
        number (``"fast"``, ``None``, NaN) makes a failed evaluation that says
        why: it is stored, never raised. ``provenance`` updates
        what the strategy wrote when it asked, with what only the run knows
        (for example the fidelity a trial actually reached and its cost).
        ``machine`` and ``software`` replace the session's configurations for
        this record (a remote job reports where it ran).
        """
        trial_id = trial if isinstance(trial, str) else trial.trial_id
        if trial_id not in self._pending:
            raise InvalidInputError("trial_id", f"{trial_id!r} is not a pending trial of this session")
        pending = self._pending[trial_id]
        if failure is None and isinstance(result, Mapping):
            missing = [o for o in self.problem.objectives if o not in result]
            if missing:
                failure = f"output {missing[0]!r} missing from the reported result"
        prov = pending.provenance
        if provenance:
            prov = Provenance.model_validate({**prov.model_dump(by_alias=True), **provenance})
        record = FunctionEvaluation.create(
            pending.task, pending.config, result, failure=failure, provenance=prov,
            machine_configuration=self.machine_configuration if machine is None else dict(machine),
            software_configuration=self.software_configuration if software is None else dict(software),
            additional_output=additional_output,
            # one uid per (session, trial): a tell retried after a store error that had in fact
            # written the record is absorbed by the store's uid check, not stored twice
            uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"raytuner:{self.session_id}/{trial_id}")),
        )
        self.store.append(self.problem_name, record)  # durable before acknowledged
        del self._pending[trial_id]
        self._records.append(record)
        self.strategy.tell(record)
        return record

    def best(self, task: Mapping[str, Any], objective: str | None = None) -> FunctionEvaluation | None:
        """The best successful evaluation of ``task`` (by the objective's goal), or ``None``."""
        target = self.problem.objective(objective)
        key = task_key(task)
        scored = [(target.sign() * v, r) for r in self._records
                  if task_key(r.task_parameter) == key and (v := r.value(target.name)) is not None]
        return min(scored, key=lambda pair: pair[0])[1] if scored else None
