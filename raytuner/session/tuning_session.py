"""A tuning session: one engine wired to one history store, owning the whole trial lifecycle.

Every face (a session driven in Python, the Ray searchers and the GPTuneBand
scheduler, the gRPC service) asks and tells through this class, so a trial
lives the same life everywhere:

- **durable asks**: a trial is written to the store's ledger
  (:meth:`raytuner.store.HistoryStore.ledger`, log ``trials``) before
  :meth:`TuningSession.ask` returns it; when that write fails the trial is
  kept *unsaved*, and asking again with its trial id saves and returns it;
- **idempotent asks**: asking with the trial id of a pending trial returns
  that trial; with the id of a told one raises :class:`~raytuner.errors.TrialConflict`;
- **durable, idempotent tells**: a record is in the store when
  :meth:`TuningSession.tell` returns; telling a trial again with the same
  result returns the first record (:meth:`TuningSession.told_record` says
  whether a trial was told), with another result raises ``TrialConflict``,
  and a trial never asked raises :class:`~raytuner.errors.UnknownTrial`;
- **what a result becomes**: the values first — a value that is not a finite
  number (``"fast"``, ``None``, NaN) makes a failed record that says why;
  then the names — a name that is not an objective of the problem is refused
  (:class:`~raytuner.errors.InvalidInputError` naming ``outputs['name']``,
  nothing written), a missing objective makes a failed record;
- **an evaluation limit** (``max_evaluations``, 0 = none): once told and pending trials
  reach it, ``ask`` raises :class:`~raytuner.errors.AwaitingResults` while
  trials are pending and :class:`~raytuner.errors.TuningFinished` once none
  is; an engine's own ``TuningFinished`` likewise waits for the trials in flight;
- **trial leases** (``lease_seconds``, 0 = none; :mod:`raytuner.session.leases`): a
  handed-out trial is its job's while the job renews it (:meth:`TuningSession.renew`, or
  asking again with its trial id); once its lease ends it *expires* and the next ask hands
  out its task and configuration again under a new trial id (the ledger's line names the
  trial it ``replaces``). Both count as one trial of the budget: the first of them told is
  the one the engine learns from, and a late tell of the other is still stored and
  acknowledged (kept, never lost). A renewal that comes before the next ask took the
  expired trial over gives it back to its job;
- **restarts**: :meth:`TuningSession.resume` replays the stored records and
  adopts the trials this session id asked and never told (with a full lease from the restart);
- **GPTune's history-database options** (:class:`~raytuner.problem.history_options.HistoryOptions`,
  ``history=``): which stored records a resumed session replays
  (``load_func_eval``, the loadable machine and software configurations,
  ``no_load_check``), whether stored models are used as they are
  (``load_surrogate_model``), and whether evaluations and models go to the
  store (``save_func_eval``, ``save_model``).

Example:
    >>> import tempfile
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.store import JsonStore
    >>> from raytuner.engines import RandomSearch
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> store = JsonStore(tempfile.mkdtemp())
    >>> session = TuningSession(problem, RandomSearch(problem, [{"t": 1.0}], seed=0), store, "demo",
    ...                         max_evaluations=1)
    >>> trial = session.ask()
    >>> [d["trial_id"] for d in store.ledger().read("trials")] == [trial.trial_id]   # durable before handed out
    True
    >>> record = session.tell(trial, {"y": trial.config["x"] ** 2})
    >>> session.tell(trial, {"y": trial.config["x"] ** 2}) is record                  # a retry: the first record
    True
    >>> [r.uid for r in store.evaluations("demo")] == [record.uid], session.finished
    (True, True)
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from raytuner.engines.base import Engine, check_record, fitting_records, task_key
from raytuner.errors import AwaitingResults, InvalidInputError, TrialConflict, TuningFinished, UnknownTrial, shown
from raytuner.problem.environment import describe_machine, software_configuration
from raytuner.problem.history_options import HistoryOptions
from raytuner.problem.outcome import result_failure
from raytuner.problem.pareto import pareto_front
from raytuner.problem.records import (
    FunctionEvaluation,
    Provenance,
    SurrogateModelRecord,
    check_problem_name,
    parse_outputs,
)
from raytuner.problem.space import ProblemSpace
from raytuner.session.leases import Leases
from raytuner.session.progress import ProgressTally
from raytuner.session.trial import Trial, TrialNamer, read_trials
from raytuner.store.base import HistoryStore
from raytuner.store.ledger import Ledger

__all__ = ["TuningSession", "Trial", "TrialNamer"]

log = logging.getLogger(__name__)


class TuningSession:
    """Ask/tell over an engine with the whole trial lifecycle (see the module documentation).

    Its first arguments follow the convention of every face: what is tuned (``problem``, then the
    engine, which holds the tasks), where it is kept (``store``) and under which name
    (``problem_name``), as in ``LCMSearcher(problem, tasks, store, problem_name)``.

    Args:
        problem: The problem's spaces.
        engine: The engine.
        store: The history store (records, and the ledger of handed-out trials).
        problem_name: The problem's name in the store.
        machine: User-given machine configuration; wins over what is captured.
        software: User-given software configuration; wins over what is captured.
        software_packages: Extra packages whose versions each record carries.
        session_id: The session's id (a new one when not given).
        max_evaluations: The most trials to hand out, told ones and pending ones (0: no limit).
        ledger: Where handed-out trials are written (default: ``store.ledger()``).
        history: GPTune's history-database options (defaults: load and save everything).
        lease_seconds: How long a handed-out trial stays leased without a renewal (0: trials never expire).
        uid_salt: A secret mixed into each tell's uid (the tuning service gives each session one): whoever knows
            a session's id and a trial's cannot store a record under the uid its tell will take ("": none).
    """

    def __init__(
        self,
        problem: ProblemSpace,
        engine: Engine,
        store: HistoryStore,
        problem_name: str,
        *,
        machine: Mapping[str, Any] | None = None,
        software: Mapping[str, Any] | None = None,
        software_packages: tuple[str, ...] = (),
        session_id: str | None = None,
        max_evaluations: int = 0,
        ledger: Ledger | None = None,
        history: HistoryOptions | Mapping[str, Any] | None = None,
        lease_seconds: float = 0.0,
        uid_salt: str = "",
    ) -> None:
        if not isinstance(problem, ProblemSpace):
            raise InvalidInputError(
                "problem",
                f"{problem!r} is not a ProblemSpace: the order is TuningSession(problem, engine, store, problem_name)",
            )
        if isinstance(max_evaluations, bool) or not isinstance(max_evaluations, int) or max_evaluations < 0:
            raise InvalidInputError("max_evaluations", f"{max_evaluations!r} is not a count (0 = no limit)")
        self.problem_name = check_problem_name(problem_name)
        self.problem = problem
        self.engine = engine
        self.store = store
        store.check_writable(self.problem_name)  # a damaged problem: refuse now, saying how to repair
        self.session_id = session_id or uuid.uuid4().hex
        self._uid_salt = uid_salt
        self.max_evaluations = max_evaluations
        self.machine = describe_machine(machine)
        self.software_configuration = software_configuration(software_packages, software)
        self.history = HistoryOptions.parse(history)
        if not self.history.save_func_eval:
            log.warning(
                "session %s: save_func_eval is no: its evaluations stay out of the history store "
                "(kept in its ledger only)",
                self.session_id,
            )
        self._given_ledger = ledger
        self._store_ledger: Ledger | None = None
        self._pending: dict[str, Trial] = {}
        self._unsaved: set[str] = set()  # asked, but the ledger refused them: never handed out
        self._told: dict[str, FunctionEvaluation] = {}
        #: The leases of the trials in flight.
        self.leases = Leases(lease_seconds)
        self._expired: dict[str, Trial] = {}  # lease ended, not told: a late tell of them is still stored
        self._queued: list[str] = []  # expired trials whose task and configuration are to be handed out again
        self._slot_of: dict[str, str] = {}  # a trial handed out again -> the first trial of its configuration
        self._records: list[FunctionEvaluation] = []
        #: Per task: evaluations, failures, cost and the best so far (logged at INFO with each tell).
        self.progress = ProgressTally(problem)
        #: Whether the engine said its plan is done (no trial is asked of it again).
        self.engine_finished = False

    def __getstate__(self) -> dict[str, Any]:
        # Ray pickles the searchers that hold a session: the store's ledger is fetched again after
        state = dict(self.__dict__)
        state["_store_ledger"] = None
        return state

    @property
    def ledger(self) -> Ledger:
        """Where this session writes its handed-out trials."""
        if self._given_ledger is not None:
            return self._given_ledger
        if self._store_ledger is None:
            self._store_ledger = self.store.ledger()
        return self._store_ledger

    @classmethod
    def resume(
        cls,
        problem: ProblemSpace,
        engine: Engine,
        store: HistoryStore,
        problem_name: str,
        *,
        session_only: bool = False,
        stored: Sequence[FunctionEvaluation] | None = None,
        models: Sequence[SurrogateModelRecord] | None = None,
        asked: Sequence[Trial] | None = None,
        **kwargs: Any,
    ) -> TuningSession:
        """A session whose engine replayed the stored evaluations, with its trials in flight adopted.

        The engine replays the session's own evaluations (of an earlier run
        of this ``session_id``) and, unless ``session_only`` or the history
        options say otherwise (``load_func_eval``, the load check), every
        other stored evaluation of its tasks. Evaluations that do not fit
        ``problem`` (another version of the problem wrote them) are skipped
        with one warning that counts them. The session's own records tell
        which of its trials were told; the trials the ledger holds as asked
        by this ``session_id`` and not told are adopted (pending again, so
        telling them later records them).

        Args:
            problem: The problem's spaces.
            engine: A fresh engine, to be rebuilt from the store.
            store: The history store.
            problem_name: The problem's name in the store.
            session_only: By default replay only this session's own evaluations
                (``load_func_eval`` in ``history`` decides when given).
            stored: The problem's stored evaluations, already read (read from ``store`` when ``None``):
                a server rebuilding several sessions of one problem reads and validates them once.
            models: The problem's stored surrogate models, already read (likewise).
            asked: The trials the ledger holds as handed out by this session id, already read (likewise).
            **kwargs: The session's options (``session_id``, ``max_evaluations``, ``machine``, ``history``, ...).
        """
        session = cls(problem, engine, store, problem_name, **kwargs)
        keys = {task_key(t) for t in engine.spec_tasks}  # the engine's own tasks (not its sources')
        if stored is None:
            stored = store.evaluations(problem_name)
        stored = [r for r in stored if task_key(r.task_parameter) in keys]
        kept_out = [r for r in session._kept_out() if task_key(r.task_parameter) in keys]
        own = [r for r in stored if session._owns(r)] + kept_out
        session._told = {r.raytuner.trial_id: r for r in own if r.raytuner and r.raytuner.trial_id}
        replayed = session.history.replayed(stored, session._owns, not session_only) + kept_out
        records = fitting_records(problem, replayed, f"stored {problem_name}")
        session._records = records
        session.progress.add_all(records)
        engine.replay(records)
        engine.restore_models(
            store.models(problem_name) if models is None else list(models), fixed=session.history.load_surrogate_model
        )
        adopted = session._adopt_in_flight(session.asked_trials() if asked is None else asked)
        log.info(
            "resumed %s (session %s): replayed %d evaluations, adopted %d trial(s) in flight",
            problem_name,
            session.session_id,
            len(records),
            adopted,
        )
        return session

    def _owns(self, record: FunctionEvaluation) -> bool:
        return record.raytuner is not None and record.raytuner.session_id == self.session_id

    def _kept_out(self) -> list[FunctionEvaluation]:
        """This session's evaluations kept in its ledger instead of the store (``save_func_eval`` no)."""
        records = [
            FunctionEvaluation.model_validate(d["record"])
            for d in self.ledger.read("session_evaluations", session_id=self.session_id)
        ]
        return list({r.uid: r for r in reversed(records)}.values())[::-1]  # a retried tell's line: once

    def _adopt_in_flight(self, asked: Iterable[Trial]) -> int:
        """Adopt the trials ``asked`` (the ledger's, of this session) that were not told; returns how many.

        A trial that another one replaces (its lease expired), or whose configuration was told under
        another trial id, is not in flight: it is kept as expired, so that a late tell of it is stored.
        """
        asked = list(asked)
        for trial in asked:
            self._note_slot(trial)
        replaced = {t.replaces for t in asked if t.replaces}
        told = self._told_slots()
        adopted = skipped = 0
        for trial in asked:
            if trial.trial_id in self._told or trial.trial_id in self._pending:
                continue
            if trial.trial_id in replaced or self._slot(trial.trial_id) in told:
                self._expired[trial.trial_id] = trial
                continue
            try:
                self.adopt(trial)
            except InvalidInputError as exc:  # asked under another version of the problem
                skipped += 1
                log.debug("not adopting trial %s: %s", trial.trial_id, exc)
                continue
            adopted += 1
        if skipped:
            log.warning(
                "session %s: %d trial(s) in flight do not fit the problem and were not adopted",
                self.session_id,
                skipped,
            )
        return adopted

    # -- state ------------------------------------------------------------------------------------

    @property
    def records(self) -> list[FunctionEvaluation]:
        """The evaluations of this session's tasks, oldest first (replayed ones included)."""
        return list(self._records)

    @property
    def pending(self) -> dict[str, Trial]:
        """Trials handed out (or adopted) and not yet told, by trial id."""
        return dict(self._pending)

    @property
    def told_count(self) -> int:
        """How many trials this session has told (those of earlier runs of the same session id included)."""
        return len(self._told)

    @property
    def expired(self) -> dict[str, Trial]:
        """Trials whose lease ended before they were told, by trial id (a tell of one is still stored)."""
        return dict(self._expired)

    def _slot(self, trial_id: str) -> str:
        """The first trial of ``trial_id``'s configuration (itself, unless it was handed out again)."""
        return self._slot_of.get(trial_id, trial_id)

    def _note_slot(self, trial: Trial) -> None:
        if trial.replaces:
            self._slot_of[trial.trial_id] = self._slot(trial.replaces)

    def _told_slots(self) -> set[str]:
        """The trials of the budget that are told (a trial and those that replace it count once)."""
        return {self._slot(t) for t in self._told}

    def _in_flight(self) -> int:
        """Trials of the budget handed out and not told: pending ones, and expired ones to hand out again."""
        told = self._told_slots()
        return len({self._slot(t) for t in self._pending if self._slot(t) not in told} | set(self._queued))

    def told_record(self, trial_id: str) -> FunctionEvaluation | None:
        """The record trial ``trial_id`` was told with, or ``None`` when it was not told.

        Args:
            trial_id: The trial's id.
        """
        return self._told.get(trial_id)

    def asked_trials(self) -> Iterator[Trial]:
        """Every trial the ledger holds as handed out by this session, oldest first (told ones included)."""
        yield from read_trials(self.ledger.read("trials", session_id=self.session_id))

    @property
    def finished(self) -> bool:
        """Whether no trial will be handed out any more: ``max_evaluations`` reached or the plan done, none pending."""
        spent = 0 < self.max_evaluations <= len(self._told_slots())
        return (spent or self.engine_finished) and not self._in_flight()

    # -- ask --------------------------------------------------------------------------------------

    def ask(self, task: Mapping[str, Any] | None = None, trial_id: str | TrialNamer | None = None) -> Trial:
        """The next trial to run (for ``task`` when given), in the ledger when this returns.

        Args:
            task: The task to ask for (any of the engine's tasks when ``None``).
            trial_id: The trial's id (a new one when ``None``); a pending trial's id returns that
                trial, a told one's raises :class:`~raytuner.errors.TrialConflict`. A function of the
                suggestion names the trial once the engine has chosen it.

        An expired trial's task and configuration are handed out again (under a new trial id) before
        anything new is asked of the engine.

        Raises:
            AwaitingResults: Nothing to hand out until trials in flight are told.
            TuningFinished: ``max_evaluations`` are told or the engine's plan is done, and nothing is in flight.
        """
        self.expire()
        if isinstance(trial_id, str):
            known = self._known(trial_id)
            if known is not None:
                return known
        elif self._unsaved:  # the oldest trial the ledger refused: handed out once saved
            oldest = next(tid for tid in self._pending if tid in self._unsaved)
            self._save(self._pending[oldest])
            return self._pending[oldest]
        again = self._hand_out_again(task, trial_id)
        if again is not None:
            return again
        self._check_open()
        try:
            suggestion = self.engine.ask(task)
        except TuningFinished:
            self.engine_finished = True
            if self._pending:
                raise AwaitingResults(
                    f"the engine's plan is done; {len(self._pending)} trial(s) are in flight"
                ) from None
            raise
        for model in self.engine.take_models():
            if self.history.save_model:
                self.store.append_model(self.problem_name, model)
        name = trial_id(suggestion) if callable(trial_id) else trial_id or uuid.uuid4().hex
        if name in self._pending or name in self._told:
            raise TrialConflict(f"trial_id: {name!r} names a trial of this session already")
        provenance = suggestion.provenance.model_copy(update={"trial_id": name, "session_id": self.session_id})
        trial = Trial(task=suggestion.task, config=suggestion.config, provenance=provenance, trial_id=name)
        self._pending[name] = trial
        self._unsaved.add(name)
        self._save(trial)  # durable before handed out
        return trial

    def give(
        self,
        task: Mapping[str, Any],
        config: Mapping[str, Any],
        trial_id: str | None = None,
        field: str = "point",
        **provenance: Any,
    ) -> Trial:
        """Hand out a given configuration of ``task`` as a trial (Ray's ``points_to_evaluate``).

        The task and configuration are checked against the problem before anything is stored (bad
        input: one line naming ``field.key`` and the allowed values); the trial is then in the
        ledger like an asked one, its provenance's ``proposer`` ``"given"``, and the engine counts
        it as pending (:meth:`~raytuner.engines.base.Engine.add_pending`). Its told result is
        learnt as any record is; it is not one of the engine's initial design.

        Args:
            task: One of the tasks the engine tunes (:attr:`Engine.spec_tasks`).
            config: Every tuning parameter's value.
            trial_id: The trial's id (a new one when ``None``); a pending trial's id returns that trial.
            field: The name bad input is reported under (``points_to_evaluate[0]``, ...).
            **provenance: Extra provenance keys (``point``: its index in the list given).

        Raises:
            AwaitingResults: ``max_evaluations`` trials are handed out already.
            TuningFinished: ``max_evaluations`` are told.
        """
        t = self.problem.input_space.check(task, field)
        x = self.problem.parameter_space.check(config, field)
        own = self.engine.spec_tasks  # the tasks it tunes, not its sources
        if task_key(t) not in {task_key(k) for k in own}:
            raise InvalidInputError(field, f"task {t} is not one the engine tunes", allowed=own)
        self.problem.check(t, x)
        if trial_id is not None:
            known = self._known(trial_id)
            if known is not None:
                return known
        self._check_open()
        name = trial_id or uuid.uuid4().hex
        given = Provenance(proposer="given", trial_id=name, session_id=self.session_id, **provenance)
        trial = Trial(task=t, config=x, provenance=given, trial_id=name)
        self.engine.add_pending(t, x, given)
        self._pending[name] = trial
        self._unsaved.add(name)
        self._save(trial)  # durable before handed out
        return trial

    def _known(self, trial_id: str) -> Trial | None:
        """The pending trial ``trial_id``, its lease renewed (saved now if the ledger refused it before).

        An expired one not handed out again yet is given back; told, or handed out again: a conflict.
        """
        trial = self._pending.get(trial_id)
        if trial is not None:
            if trial_id in self._unsaved:  # a retry after the ledger failed: save it now
                self._save(trial)
            self.leases.grant(trial_id)
            return trial
        if trial_id in self._told:
            raise TrialConflict(f"trial_id: trial {trial_id!r} was told already")
        if trial_id in self._expired:
            trial = self._take_back(trial_id)
            if trial is None:
                raise TrialConflict(
                    f"trial_id: trial {trial_id!r} expired and was handed out again; a tell of it is still kept"
                )
            return trial
        return None

    def _take_back(self, trial_id: str) -> Trial | None:
        """The expired trial ``trial_id``, pending and leased again, unless it was handed out again (``None``)."""
        if trial_id not in self._queued:
            return None
        self._queued.remove(trial_id)
        trial = self._pending[trial_id] = self._expired.pop(trial_id)
        self.leases.grant(trial_id)
        log.info("session %s: trial %s renewed after its lease ended; it is its job's again", self.session_id, trial_id)
        return trial

    def _save(self, trial: Trial) -> None:
        self.ledger.append("trials", trial.document(self.session_id))
        self._unsaved.discard(trial.trial_id)
        self.leases.grant(trial.trial_id)  # handed out from now

    # -- leases -----------------------------------------------------------------------------------

    def expire(self) -> list[Trial]:
        """End the leases that are over; returns the trials that expired now, earliest first.

        An expired trial is no longer pending; unless its configuration was told under another trial
        id, the next :meth:`ask` hands it out again. :meth:`ask` and :meth:`renew` call this first.
        """
        expired = []
        for trial_id in self.leases.due():
            self.leases.drop(trial_id)
            trial = self._pending.pop(trial_id, None)
            if trial is None:
                continue
            self._unsaved.discard(trial_id)
            self._expired[trial_id] = trial
            if self._slot(trial_id) not in self._told_slots():
                self._queued.append(trial_id)
            expired.append(trial)
            log.info(
                "session %s: trial %s expired (no renewal for %g s); it is handed out again",
                self.session_id,
                trial_id,
                self.leases.seconds,
            )
        return expired

    def renew(self, trial_id: str) -> tuple[Literal["LEASED", "TOLD", "EXPIRED"], float | None]:
        """Renew trial ``trial_id``'s lease; returns its state and the seconds its lease now has left.

        The state is ``"LEASED"`` (``None`` seconds: the session's leases never end), ``"TOLD"`` or
        ``"EXPIRED"`` (its lease ended and another trial took its configuration over; a tell of it is
        still stored). An expired trial not handed out again yet is given back: ``"LEASED"``.

        Args:
            trial_id: The trial.

        Raises:
            UnknownTrial: The session never handed it out.
        """
        self.expire()
        if trial_id in self._told:
            return "TOLD", None
        if trial_id in self._pending or self._take_back(trial_id) is not None:
            return "LEASED", self.leases.grant(trial_id)
        if trial_id in self._expired:
            return "EXPIRED", None
        raise UnknownTrial(f"trial_id: no trial {str(trial_id)[:80]!r} in this session")

    def _hand_out_again(self, task: Mapping[str, Any] | None, trial_id: str | TrialNamer | None) -> Trial | None:
        """The oldest expired trial (of ``task``) handed out again under a new trial id, or ``None``."""
        key = None if task is None else task_key(task)
        old = next((self._expired[t] for t in self._queued if key in (None, task_key(self._expired[t].task))), None)
        if old is None:
            return None
        name = trial_id(old) if callable(trial_id) else trial_id or uuid.uuid4().hex
        if name in self._pending or name in self._told or name in self._expired:
            raise TrialConflict(f"trial_id: {name!r} names a trial of this session already")
        self._queued.remove(old.trial_id)
        provenance = old.provenance.model_copy(update={"trial_id": name})
        trial = Trial(task=old.task, config=old.config, provenance=provenance, trial_id=name, replaces=old.trial_id)
        self._note_slot(trial)
        self._pending[name] = trial
        self._unsaved.add(name)
        self._save(trial)
        log.info("session %s: trial %s hands out expired trial %s again", self.session_id, name, old.trial_id)
        return trial

    def _check_open(self) -> None:
        told = len(self._told_slots())
        if self.finished:
            raise TuningFinished(
                f"the session's {self.max_evaluations} evaluations are told"
                if self.max_evaluations and told >= self.max_evaluations
                else "the engine's plan is done"
            )
        if self.engine_finished:
            raise AwaitingResults(f"the engine's plan is done; {self._in_flight()} trial(s) are in flight")
        if self.max_evaluations and told + self._in_flight() >= self.max_evaluations:
            raise AwaitingResults(
                f"all {self.max_evaluations} trials (max_evaluations) are handed out; {self._in_flight()} are in flight"
            )

    def adopt(self, trial: Trial) -> None:
        """Take back a trial handed out before a restart, so that its result is recorded.

        The engine counts it as pending again; telling it later works as for
        a trial this session asked. :meth:`resume` adopts the ledger's trials
        in flight by itself.

        Args:
            trial: The trial as it was handed out.
        """
        if trial.trial_id in self._pending or trial.trial_id in self._told:
            return
        self.problem.check(trial.task, trial.config)
        self._note_slot(trial)
        self.engine.add_pending(trial.task, trial.config, trial.provenance)  # the trial it replaces is not
        self._pending[trial.trial_id] = trial
        self.leases.grant(trial.trial_id)  # a full lease from the restart: no renewal reached a stopped server

    # -- tell -------------------------------------------------------------------------------------

    def tell(
        self,
        trial: Trial | str,
        result: Mapping[str, Any] | None = None,
        *,
        failure: str | None = None,
        additional_output: Mapping[str, Any] | None = None,
        provenance: Mapping[str, Any] | None = None,
        machine: Mapping[str, Any] | None = None,
        software: Mapping[str, Any] | None = None,
    ) -> FunctionEvaluation:
        """Record a trial's outputs (or its failure); durable when this returns.

        A result becomes a record as the module documentation says (a bad
        value or a missing objective: a failed record; a name that is not an
        objective: refused). Telling a told trial again returns its first
        record when the result is the same.

        Args:
            trial: The trial or its id.
            result: Output names to values (ignored with ``failure``).
            failure: Why the trial failed.
            additional_output: Extra values kept with the record.
            provenance: What only the run knows, over what the engine wrote when it asked (for
                example the fidelity a trial actually reached and its cost).
            machine: Where the trial ran (replaces the session's configuration for this record).
            software: With what software (replaces the session's configuration for this record).

        A trial whose lease expired is still recorded (a late tell is kept); when its configuration
        was told under another trial id already, the record is stored but the engine, which learnt from
        the first, is not told again.

        Raises:
            UnknownTrial: The trial was never handed out by this session.
            TrialConflict: The trial was told before with another result.
        """
        trial_id = trial if isinstance(trial, str) else getattr(trial, "trial_id", None)
        if not isinstance(trial_id, str):
            raise UnknownTrial(f"trial_id: {shown(trial)} is not a trial or a trial id")
        if failure is None:
            failure = result_failure(self.problem, result)
        if trial_id in self._told:
            return self._retold(trial_id, result, failure)
        pending = self._pending.get(trial_id) or self._expired.get(trial_id)
        if pending is None:
            raise UnknownTrial(f"trial_id: no pending trial {shown(trial_id)} in this session")
        slot = self._slot(trial_id)
        first = slot not in self._told_slots()  # the first result of this configuration: the engine learns it
        prov = pending.provenance
        if provenance:
            prov = Provenance.model_validate({**prov.model_dump(by_alias=True), **provenance})
        record = FunctionEvaluation.create(
            pending.task,
            pending.config,
            result,
            failure=failure,
            provenance=prov,
            machine_configuration=self.machine if machine is None else dict(machine),
            outputs=self.problem.objectives,
            software_configuration=self.software_configuration if software is None else dict(software),
            additional_output=additional_output,
            # one uid per (session, trial): a tell retried after a store error that had in fact
            # written the record is absorbed by the store's uid check, not stored twice
            uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"raytuner:{self.session_id}/{trial_id}{self._uid_salt}")),
        )
        if first:
            record = self.engine.admit(record)  # refused before anything is written
        else:
            check_record(self.problem, record)
        if self.history.save_func_eval:  # durable before acknowledged, in the store or the ledger
            self.store.append(self.problem_name, record)
        else:
            self.ledger.append("session_evaluations", {"session_id": self.session_id, "record": record.to_dict()})
        self._pending.pop(trial_id, None)
        self._expired.pop(trial_id, None)
        self._unsaved.discard(trial_id)
        self.leases.drop(trial_id)
        self._queued = [t for t in self._queued if self._slot(t) != slot]  # told: not handed out again
        self._told[trial_id] = record
        self._records.append(record)
        if first:
            self.engine.tell(record)
        else:
            log.info(
                "session %s: trial %s told after its configuration was told under another trial id; stored",
                self.session_id,
                trial_id,
            )
        progress = self.progress.add(record)
        if log.isEnabledFor(logging.INFO):  # the line is built only when someone reads it
            log.info("%s: %s", self.problem_name, self.progress.line(progress))
        return record

    def _retold(self, trial_id: str, result: Mapping[str, Any] | None, failure: str | None) -> FunctionEvaluation:
        record = self._told[trial_id]
        values = parse_outputs(result)[0] if failure is None else {}
        same = (failure is not None) == (record.status != "ok") and (
            failure is not None or all(record.value(k) == v for k, v in values.items())
        )
        if not same:
            raise TrialConflict(
                f"trial_id: trial {trial_id!r} was told before with another result (record {record.uid})"
            )
        return record

    def best(self, task: Mapping[str, Any] | None = None, objective: str | None = None) -> FunctionEvaluation | None:
        """The best evaluation of ``task``, or ``None`` while none counts: its engine's answer.

        Every engine answers the same way (:meth:`raytuner.engines.Engine.best`): the
        evaluation that succeeded, meets every output constraint and is best in ``objective``
        (GPTuneBand: at ``b_max`` only).

        Args:
            task: One of the tasks (default: the first).
            objective: The objective's name (default: the one the engine tunes).
        """
        return self.engine.best(task, objective)

    def best_per_task(self, objective: str | None = None) -> list[FunctionEvaluation | None]:
        """:meth:`best` of each task, in the engine's order.

        Args:
            objective: The objective's name (default: the one the engine tunes).
        """
        return self.engine.best_per_task(objective)

    def pareto_front(self, task: Mapping[str, Any]) -> list[FunctionEvaluation]:
        """The evaluations of ``task`` that meet every output constraint and no other such one dominates.

        With one objective it is the best evaluation (the first of those tied).
        An engine with its own front (GPTuneBand's: at ``b_max`` only) gives it.

        Args:
            task: The task.
        """
        own = getattr(self.engine, "pareto_front", None)
        return own(task) if callable(own) else pareto_front(self.problem, self._records, task)
