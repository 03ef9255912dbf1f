"""MLA: multitask Bayesian optimisation with an LCM (GPTune, paper 003, section 4).

Each task first gets a Latin hypercube sample of ``n_initial``
configurations; after that every suggestion comes from one LCM fitted to the
successful evaluations of *all* tasks, searched for the task at hand by an
acquisition function (EI by default). By default each task draws its own
sample (``design="per_task"``, paper 003's heterotopic case, section 4.1):
together the tasks cover the space more densely. With ``design="shared"``
(the isotropic case) every task is evaluated at the same configurations
(those a task's constraints refuse are replaced for it alone): these pairs
show the LCM how the tasks relate (``python -m benchmarks mla`` compares the
two; the documentation's benchmarks page has the figures). With
``design="staggered"`` the tasks do not all start from nothing at once: a
wave of leading tasks (a quarter, at least two, spread over the task space)
is tuned first, to its design and half as many again; then, where the
leaders' GPs predict their own evaluations unseen (:attr:`MLA.PREDICTIVE`),
every other task starts where the leaders agree (the point TransferLearning
proposes from them, as for a source start below) with a short design, and
the LCM takes over; where they do not (a landscape too rough for that many
evaluations), each gets its own full design. The LCM fits
nonnegative task weights unless its options name them
(:attr:`MLA.default_options`). Failed evaluations are never suggested again
and are left out of the model.

The engine is a fold over the evaluation log: the model is refitted when
evaluations arrived since the last fit, warm-started from the previous
optimum, and every random stream is derived from the seed and the counts in
the log. An engine rebuilt by replaying a store's evaluations (and the last
stored surrogate model, for the warm start) therefore makes the same next
suggestion as one that never stopped. Suggestions asked before earlier ones
are told (a batch for parallel trials) see those pending points as fantasy
data: their predicted mean (``batch="kriging_believer"``) or the task's
worst observed value (``batch="constant_liar"``), so a batch spreads out.

Tasks share what holds for them, and no more (``sharing="checked"``, the
default): a task's suggestion comes from the shared LCM unless an LCM of the
task's own evaluations alone predicts them better unseen, and every
:attr:`MLA.OWN_TURN`-th one comes from the task's own model regardless, so a
task whose best region lies elsewhere than the others' is still searched as
single-task BO would search it (:mod:`raytuner.engines.sharing`).
``sharing="always"`` scores every suggestion by the shared LCM, as GPTune does.

With a single task this is ordinary single-task Bayesian optimisation.

Given ``source`` data (other users' evaluations from the crowd, earlier runs
of other tasks), each source task enters the LCM as a task of its own, as
GPTuneCrowd's Multitask(TS) does: its evaluations shape the model from the
first fit on, and the engine still suggests for its own tasks only. A
source evaluation of one of the engine's tasks is data of that task (its
initial design is shorter by it). The source is read once, at the start.
A task with no data of its own starts where the source tasks agree: the
first point of its initial design is the one TransferLearning proposes with
no target data (WeightedSum(equal) over a GP per source task, paper 000),
marked ``proposer="source_start"`` in its provenance.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> from raytuner.models.executors import InlineExecutor
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem = ProblemSpace.parse(DEMO_PROBLEM)
    >>> engine = MLA(problem, [{"t": 1.0}, {"t": 1.2}], seed=0, n_initial=3, executor=InlineExecutor())
    >>> for _ in range(8):
    ...     s = engine.ask()
    ...     record = engine.tell(s, {"y": (s.config["x"] - 0.3 * s.task["t"]) ** 2})
    >>> [len(v) for v in engine.evaluated]
    [4, 4]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from raytuner.engines.base import Engine, Suggestion, other_tasks, source_records
from raytuner.engines.sharing import (
    OWN_DESIGN_NOTE,
    OWN_MODEL,
    SHARING,
    Sharing,
    loo_rank_correlation,
    own_predicts_better,
)
from raytuner.engines.stored_models import StoredModels
from raytuner.errors import InvalidInputError
from raytuner.models import LCM, FittedLCM, Hyperparameters, LCMOptions, TrainingData
from raytuner.models.acquisition import acquisition_function, optimize_acquisition
from raytuner.models.blas import one_blas_thread
from raytuner.models.executors import Executor
from raytuner.models.persistence import surrogate_record
from raytuner.problem.parameters import Categorical
from raytuner.problem.records import EvaluationSource, FunctionEvaluation, Provenance, SurrogateModelRecord, task_key
from raytuner.problem.sampling import sample_configurations
from raytuner.problem.space import ProblemSpace

if TYPE_CHECKING:
    from raytuner.engines.transfer.data import SourceData

__all__ = ["MLA", "BatchMode", "Design", "spread_tasks"]

log = logging.getLogger(__name__)

BatchMode = Literal["kriging_believer", "constant_liar"]
_BATCH_MODES = ("kriging_believer", "constant_liar")
Design = Literal["shared", "per_task", "staggered"]
_DESIGNS = ("shared", "per_task", "staggered")


def spread_tasks(tasks: Sequence[Mapping[str, Any]], count: int) -> list[int]:
    """``count`` of ``tasks`` spread over the task space: their positions, the first nearest the centre.

    Where every task parameter is a number, each next task is the one
    farthest from those chosen (parameters scaled to their range); otherwise
    the first ``count`` tasks.

    Args:
        tasks: The tasks.
        count: How many to choose.

    >>> spread_tasks([{"t": float(t)} for t in range(1, 11)], 3)
    [4, 9, 0]
    """
    names = sorted({k for t in tasks for k in t})
    try:
        X = np.array([[float(t[k]) for k in names] for t in tasks])
    except (KeyError, TypeError, ValueError):
        return list(range(min(count, len(tasks))))
    span = X.max(axis=0) - X.min(axis=0)
    X = (X - X.min(axis=0)) / np.where(span > 0, span, 1.0)
    chosen = [int(np.argmin(np.linalg.norm(X - X.mean(axis=0), axis=1)))]
    while len(chosen) < min(count, len(tasks)):
        distance = np.min(np.linalg.norm(X[:, None, :] - X[chosen][None, :, :], axis=2), axis=1)
        chosen.append(int(np.argmax(distance)))
    return chosen


class MLA(StoredModels, Engine):
    """Multitask BO over ``tasks`` (one task: single-task BO); see the module docstring.

    Args:
        problem: The problem's spaces.
        tasks: The tasks to tune (one task: single-task BO).
        seed: Seeds every random stream and model fit.
        n_initial: Size of each task's initial Latin hypercube design.
        design: ``"per_task"``: each task draws its own initial design; ``"shared"``: one for
            every task (where a task's constraints allow); ``"staggered"``: a wave of leading tasks
            first, the rest started where the leaders agree; see the module docstring.
        lcm: Configure the LCM (default: :attr:`default_options`, whose task weights fill those left open).
        acquisition: ``"ei"``, ``"pi"`` or ``"lcb"``.
        acquisition_options: The acquisition's parameters (``xi``, ``beta``).
        batch: How pending suggestions enter the model: ``"kriging_believer"`` or ``"constant_liar"``.
        executor: Runs the multi-start fits (default: inline for a fit of at most
            :data:`~raytuner.models.executors.INLINE_RECORDS` records; larger ones on Ray actors when
            Ray is initialised, else on a process pool).
        objective: The objective to minimise or maximise (default: the first).
        search_candidates: How many random points the acquisition search's global phase scores.
        sharing: ``"checked"``: each task's suggestion comes from the shared LCM unless a model of the task's own
            data predicts its evaluations better (:mod:`raytuner.engines.sharing`); ``"always"``: from the
            shared LCM (GPTune's MLA).
        source: Evaluations to learn from besides the engine's own (a list of records or an
            :class:`~raytuner.problem.records.EvaluationSource` such as :class:`raytuner.store.StoreSource`;
            default ``None``: none); see the module docstring.
    """

    name = "mla"
    #: How well models of a task's own evaluations must predict them unseen (the Spearman rho of their
    #: leave-one-out means, :func:`~raytuner.engines.sharing.loo_rank_correlation`) to lead: the leaders' mean
    #: (:meth:`~raytuner.engines.transfer.data.SourceData.predictability`) for a staggered start's followers to
    #: start short (chosen by ``python -m benchmarks mla``; the benchmarks page says how).
    PREDICTIVE = 0.7
    #: Under ``sharing="checked"``, every ``OWN_TURN``-th suggestion of a task (counting its evaluations and those
    #: in flight) comes from its own model whatever the check says: a task whose best region no evaluation has
    #: shown yet is still searched as single-task BO would search it (chosen by ``python -m benchmarks mla``).
    OWN_TURN = 3
    #: The leave-one-out rho (:func:`~raytuner.engines.sharing.loo_rank_correlation`) a task's own model needs to
    #: take its turns (``None``: none). GPTuneBand's lower brackets need :attr:`PREDICTIVE`: a bracket gets a few
    #: samples a pass, and on a landscape too rough for a model of one task's few evaluations its turns waste them.
    OWN_TURN_RHO: float | None = None
    #: The LCM's options when none are given, and the task weights where given ones leave them to the engine:
    #: nonnegative (no two tasks modelled as moving against each other).
    default_options = LCMOptions(task_weights="nonnegative")

    def __init__(
        self,
        problem: ProblemSpace,
        tasks: Sequence[Mapping[str, Any]],
        seed: int | None = None,
        *,
        n_initial: int = 10,
        design: Design = "per_task",
        lcm: LCMOptions | None = None,
        acquisition: str = "ei",
        acquisition_options: Mapping[str, float] | None = None,
        batch: BatchMode = "kriging_believer",
        executor: Executor | None = None,
        objective: str | None = None,
        search_candidates: int = 2048,
        source: Sequence[FunctionEvaluation] | EvaluationSource | None = None,
        sharing: Sharing = "checked",
    ) -> None:
        sources = [] if source is None else source_records(problem, source)
        super().__init__(problem, [*tasks, *other_tasks(sources, tasks)], seed)
        if not isinstance(n_initial, int) or n_initial < 1:
            raise InvalidInputError("n_initial", f"must be an integer >= 1, got {n_initial!r}")
        if batch not in _BATCH_MODES:
            raise InvalidInputError("batch", f"unknown batch mode {batch!r}", allowed=list(_BATCH_MODES))
        if design not in _DESIGNS:
            raise InvalidInputError("design", f"unknown initial design {design!r}", allowed=list(_DESIGNS))
        if sharing not in SHARING:
            raise InvalidInputError("sharing", f"unknown sharing {sharing!r}", allowed=list(SHARING))
        self.n_initial = n_initial
        self.design = design
        requested = lcm or self.default_options  # kept as given: a rebuilt engine resolves it alike
        self.model = LCM(requested.weighted(self.default_options.task_weights).over(problem.parameter_space))
        self._chosen_columns = requested.categorical is not None  # else a stored model's are adopted
        self.acquisition = acquisition_function(acquisition, **dict(acquisition_options or {}))
        self.batch = batch
        self.executor = executor
        self.objective = problem.objective(objective)
        self.search_candidates = search_candidates
        self.sharing = sharing
        self._keep_options(
            n_initial=n_initial,
            design=design,
            lcm=requested,
            acquisition=acquisition,
            acquisition_options=acquisition_options,
            batch=batch,
            objective=self.objective.name,
            search_candidates=search_candidates,
            sharing=sharing,
        )
        self.source = source
        self.targets: list[int] = list(range(len(tasks)))  # tasks this engine suggests for (sources follow)
        self.evaluated: list[list[dict[str, Any]]] = [[] for _ in self.tasks]
        self.pending: list[list[dict[str, Any]]] = [[] for _ in self.tasks]
        self._records: list[FunctionEvaluation] = []
        self._uids: set[str] = set()
        self._initial: list[list[dict[str, Any]] | None] = [None for _ in self.tasks]
        self._start: dict[int, dict[str, Any]] = {}  # per task, its design's point from the source tasks
        self._start_data: SourceData | None = None  # the source tasks' GPs the starts are proposed from
        self._from_sources = [
            r
            for r in sources  # the source tasks' values (a start for a task with none)
            if (v := r.value(self.objective.name)) is not None
            and np.isfinite(v)
            and self.task_index(r.task_parameter) not in self.targets
        ]
        self._fitted: FittedLCM | None = None
        self._fitted_on = -1
        self._own: dict[tuple[tuple[int, ...], int], FittedLCM | None] = {}  # (own tasks, horizon): their model
        self._warm: Hyperparameters | None = None
        self._warm_optimised: int | None = None  # how many samples the warm hyperparameters were optimised on
        self._restored: SurrogateModelRecord | None = None
        self._fixed: Hyperparameters | None = None  # a stored model used as it is (load_surrogate_model)
        self._notes: dict[str, Any] = {}  # what the last search adds to its suggestion's provenance
        self._leaders: list[int] | None = None  # a staggered start's leading tasks
        self._followers_from: list[FunctionEvaluation] | None = None  # the leaders' records the followers start from
        self._predictability: float | None = None  # how well the leaders' GPs predict their own data (-1: unknown)
        self._source_uids = {r.uid for r in sources}  # what the store does not hold: kept with each model
        for record in sources:
            self._fold(record)

    @property
    def spec_tasks(self) -> list[dict[str, Any]]:
        """The engine's own tasks (the source tasks come from the source)."""
        return [dict(self.tasks[i]) for i in self.targets]

    # -- ask -----------------------------------------------------------------------------------
    def ask(self, task: Mapping[str, Any] | None = None) -> Suggestion:
        """The next configuration for ``task`` (default: the task with the fewest evaluations).

        Args:
            task: The task (default: the task with the fewest evaluations).
        """
        index = self._next_task() if task is None else self._own_index(task)
        config = self._initial_point(index)
        proposer = "source_start" if config is not None and config == self._start.get(index) else "initial"
        notes: dict[str, Any] = {}
        if config is None:
            # small matrices: one BLAS thread is faster, and keeps results independent of timing
            with one_blas_thread():
                config, proposer = self.propose(index)
            notes, self._notes = self._notes, {}
        self.pending[index].append(config)
        return Suggestion(
            task=dict(self.tasks[index]),
            config=config,
            provenance=Provenance(engine=self.name, proposer=proposer, **notes),
        )

    def ask_batch(self, size: int, task: Mapping[str, Any] | None = None) -> list[Suggestion]:
        """``size`` suggestions at once (each sees the earlier ones as pending fantasies).

        Args:
            size: How many suggestions.
            task: The task (default: the engine's choice).
        """
        return [self.ask(task) for _ in range(size)]

    def _own_index(self, task: Mapping[str, Any]) -> int:
        """The position of one of the tasks this engine tunes; a source task is refused, naming the field."""
        index = self.task_index(task)
        if index not in self.targets:
            raise InvalidInputError(
                "task", f"{dict(task)} is a source task of this engine, not one it tunes", allowed=self.spec_tasks
            )
        return index

    def _next_task(self) -> int:
        open_tasks = self.targets if self.followers_started() else self.leaders
        counts = [len(self.evaluated[i]) + len(self.pending[i]) for i in open_tasks]
        return open_tasks[int(np.argmin(counts))]

    # -- the staggered start -------------------------------------------------------------------
    @property
    def leaders(self) -> list[int]:
        """The tasks tuned first under ``design="staggered"`` (every task under the other designs).

        A quarter of the tasks (at least two of three or more), spread over the
        task space where the task parameters are numbers (:func:`spread_tasks`),
        else the first ones.
        """
        if self.design != "staggered" or len(self.targets) < 2:
            return list(self.targets)
        if self._leaders is None:
            count = max(2, -(-len(self.targets) // 4)) if len(self.targets) > 2 else 1
            if any(isinstance(p, Categorical) for p in self.problem.input_space):  # no distance between them
                self._leaders = self.targets[:count]
            else:
                self._leaders = [self.targets[i] for i in spread_tasks([self.tasks[i] for i in self.targets], count)]
        return self._leaders

    @property
    def lead(self) -> int:
        """How many evaluations each leader gets before the other tasks start: its design and half as many again."""
        return self.n_initial + max(1, self.n_initial // 2)

    def design_size(self, index: int) -> int:
        """How many configurations task ``index``'s initial design has.

        A follower of a staggered start whose leaders' models predict
        (:meth:`followers_start_short`) has a short one (a fifth of
        ``n_initial``, at least 2), its first point where the leaders agree.

        Args:
            index: The task's position in :attr:`tasks`.
        """
        if self.design == "staggered" and index not in self.leaders and self.followers_start_short():
            return max(2, self.n_initial // 5)
        return self.n_initial

    def followers_start_short(self) -> bool:
        """Whether a staggered start's followers start from the leaders: the leaders' GPs predict their own
        evaluations unseen with a mean leave-one-out Spearman rho of at least :attr:`PREDICTIVE` (else each
        follower gets the full design, as under ``design="per_task"``).

        A short design pays where a model of a few evaluations already tells
        good configurations from bad, whether or not the leaders agree with
        each other: the LCM learns how much each follower shares with them.
        """
        if not self.followers_started() or self._followers_from is None:
            return False
        if self._predictability is None:
            data = self._leader_data()
            leaders = [self.tasks[i] for i in self.leaders]
            predictability = data.predictability(leaders) if data is not None else None
            self._predictability = -1.0 if predictability is None else predictability
            log.info(
                "%s: the leading tasks' GPs %s predict their own evaluations with rho %.2f: the other tasks start %s",
                self.name,
                [dict(t) for t in leaders],
                self._predictability,
                "short, where the leaders agree" if self._predictability >= self.PREDICTIVE else "with full designs",
            )
        return self._predictability >= self.PREDICTIVE

    def _leader_data(self) -> SourceData | None:
        """The leaders' successful records as source data (their GPs), as the followers started."""
        from raytuner.engines.transfer.data import SourceData  # tla builds on MLA

        ok = self.objective.name
        led = [r for r in self._followers_from or [] if (v := r.value(ok)) is not None and np.isfinite(v)]
        if not led:
            return None
        records = [*self._from_sources, *led]
        if self._start_data is None or self._start_data.uids != {r.uid for r in records}:
            self._start_data = SourceData(
                self.problem, records, objective=ok, lcm=self.model.options, executor=self.executor
            )
        return self._start_data

    def _leaders_records(self) -> list[FunctionEvaluation] | None:
        """The leaders' records as the log stood when each leader had :attr:`lead` of them (``None``: not yet).

        Read from the log's order alone, so a replayed engine starts its followers alike.
        """
        leaders = set(self.leaders)
        counts = dict.fromkeys(leaders, 0)
        for n, record in enumerate(self._records):
            index = self.task_index(record.task_parameter)
            if index in counts:
                counts[index] += 1
                if min(counts.values()) >= self.lead:
                    return [r for r in self._records[: n + 1] if self.task_index(r.task_parameter) in leaders]
        return None

    def followers_started(self) -> bool:
        """Whether every task is open to suggestions (always, but while a staggered start's leaders lead)."""
        if self.design != "staggered" or len(self.leaders) == len(self.targets):
            return True
        if self._followers_from is None:
            self._followers_from = self._leaders_records()
        return self._followers_from is not None

    def _stream(self, *keys: int) -> np.random.Generator:
        told = len(self._records)
        waiting = sum(len(p) for p in self.pending)
        return np.random.default_rng(np.random.SeedSequence([self.seed or 0, told, waiting, *keys]))

    def _initial_point(self, index: int) -> dict[str, Any] | None:
        """The next unused point of the task's initial design, or ``None`` once it is spent."""
        used = len(self.evaluated[index]) + len(self.pending[index])
        if used >= self.design_size(index):
            return None
        if self._initial[index] is None:
            self._initial[index] = self.initial_design(index)
        taken = {task_key(c) for c in self.evaluated[index] + self.pending[index]}
        for config in self._initial[index] or []:
            if task_key(config) not in taken:
                return config
        return None

    def designing(self, task: Mapping[str, Any]) -> bool:
        """Whether the next suggestion for ``task`` comes from its initial design (not from the model).

        Args:
            task: One of the tasks this engine tunes.
        """
        return self._initial_point(self._own_index(task)) is not None

    def _own_design(
        self, index: int, exclude: Sequence[Mapping[str, Any]] = (), count: int | None = None
    ) -> list[dict[str, Any]]:
        stream = np.random.SeedSequence([self.seed or 0, 7919, index])
        return sample_configurations(
            self.problem,
            self.tasks[index],
            self.n_initial if count is None else count,
            seed=np.random.default_rng(stream),
            exclude=exclude,
        )

    def _shared_design(self, index: int) -> list[dict[str, Any]]:
        """The first task's design, less the points this task's constraints refuse, refilled from its own stream."""
        kept = [c for c in self._own_design(0) if self.problem.is_valid(self.tasks[index], c)]
        if len(kept) == self.n_initial:
            return kept
        return kept + self._own_design(index, exclude=kept, count=self.n_initial - len(kept))

    def initial_design(self, index: int) -> list[dict[str, Any]]:
        """The task's initial sample: an LHS of ``n_initial`` valid configurations, the first from the sources.

        Under ``design="shared"`` a task takes the first task's design, less
        the points its own constraints refuse, which it replaces from a
        Latin hypercube of its own. A task with no successful evaluation of its own and
        :meth:`start_sources` takes as its first point the sources' consensus
        (see the module docstring).

        Args:
            index: The task's position in :attr:`tasks`.
        """
        if self.design == "shared" and index != 0:
            design = self._shared_design(index)
        else:
            design = self._own_design(index, count=self.design_size(index))
        records = self.start_sources(index)
        if not records or any(r.status == "ok" and self.task_index(r.task_parameter) == index for r in self._records):
            return design
        from raytuner.engines.transfer.data import SourceData  # tla builds on MLA
        from raytuner.engines.transfer.engine import FIRST, TransferLearning

        if self._start_data is None or self._start_data.uids != {r.uid for r in records}:  # its GPs serve every task
            self._start_data = SourceData(
                self.problem, records, objective=self.objective.name, lcm=self.model.options, executor=self.executor
            )
        start = TransferLearning(
            self.problem,
            self.tasks[index],
            self._start_data,
            FIRST,
            self.seed,
            lcm=self.model.options,
            objective=self.objective.name,
            executor=self.executor,
        ).ask()
        if start.provenance.proposer != "model":  # its model failed: no consensus, the plain LHS
            return design
        self._start[index] = start.config
        return [start.config, *[c for c in design if c != start.config]][: self.design_size(index)]

    def start_sources(self, index: int) -> list[FunctionEvaluation]:
        """The source records a task's first initial point is chosen from: every source task's.

        A follower of a staggered start takes the leaders' successful records
        (as they stood when the followers started) as well.

        Args:
            index: The task's position in :attr:`tasks`.
        """
        if self.design == "staggered" and index not in self.leaders and self.followers_start_short():
            data = self._leader_data()
            return data.records if data is not None else self._from_sources
        return self._from_sources

    # -- model and search ------------------------------------------------------------------------
    def _training(self, count: int) -> tuple[TrainingData | None, list[str]]:
        try:
            return TrainingData.from_records(self.problem, self.tasks, self._records[:count], self.objective.name)
        except InvalidInputError:  # no successful evaluation yet
            return None, []

    def levels(self) -> dict[str, Any] | None:
        """Where a task input is an evaluation's fidelity level, as its models keep it (``None``: none; GPTuneBand's
        sampler has one: :func:`~raytuner.models.persistence.surrogate_record`'s ``levels``)."""
        return None

    def fit_horizon(self) -> int:
        """How many of the told records (oldest first) the model is fitted to: all of them.

        An engine that refits less often (once per round) returns an earlier
        point of the log; the horizon must depend on the log alone, so that
        a replayed engine fits the same data.
        """
        return len(self._records)

    def fitted_model(self) -> FittedLCM | None:
        """The LCM of the successful evaluations up to :meth:`fit_horizon` (refitted when it moves)."""
        horizon = self.fit_horizon()
        if self._fitted is not None and self._fitted_on == horizon:
            return self._fitted
        data, uids = self._training(horizon)
        if data is None:
            return None
        fitted = self._stored_fit(uids, horizon)
        if fitted is None:
            fixed = self._fixed if self._fixed is not None and self._fixed.shape[1] == data.tasks else None
            fitted = self.fit(data) if fixed is None else self.model.condition(data, fixed)
            named = set(uids)
            sources = [r for r in self._records[:horizon] if r.uid in self._source_uids and r.uid in named]
            self._new_models.append(
                surrogate_record(
                    fitted,
                    self.problem,
                    self.tasks,
                    uids,
                    self.modeler,
                    self.objective.name,
                    self.sampler(),
                    sources=sources,
                    levels=self.levels(),
                )
            )
        self._fitted, self._fitted_on, self._warm = fitted, horizon, fitted.hyperparameters
        self._warm_optimised = fitted.report.optimised_samples
        return fitted

    def fit(self, data: TrainingData) -> FittedLCM:
        """Fit the LCM to ``data`` (warm-started); TLA engines override this.

        The warm hyperparameters are re-optimised once the data have grown
        by ``LCMOptions.refit_growth`` since they were last optimised;
        until then the new data are conditioned on them.

        Args:
            data: The successful evaluations, encoded.
        """
        growth, last = self.model.options.refit_growth, self._warm_optimised
        samples = int(sum(np.isfinite(v).sum() for v in data.y))
        if (
            self._warm is not None
            and last is not None
            and samples < (1 + growth) * last
            and self._warm.shape[1] == data.tasks
        ):
            return self.model.condition(data, self._warm, optimised_samples=last)
        return self.model.fit(data, seed=self._stream(104729), executor=self.executor, warm_start=self._warm)

    def with_fantasies(self, fitted: FittedLCM, tasks: Sequence[int] | None = None) -> FittedLCM:
        """``fitted`` conditioned on the pending suggestions of its tasks (see ``batch``).

        Args:
            fitted: A model of this engine's evaluations (:meth:`fitted_model`, or a task's own model).
            tasks: The engine's task of each of the model's tasks (default: the same positions).
        """
        for position, i in enumerate(range(len(self.tasks)) if tasks is None else tasks):
            configs = self.pending[i]
            if not configs:
                continue
            X = self.problem.parameter_space.encode(configs)
            if self.batch == "kriging_believer":
                z = fitted.predict_standardised(position, X)[0]
            else:
                observed = fitted.z[fitted.task == position]
                sign = self.objective.sign()
                lie = sign * float(np.max(sign * observed)) if len(observed) else 0.0
                z = np.full(len(X), lie)
            fitted = fitted.condition_on(position, X, z)
        return fitted

    def follow(self, host: MLA) -> None:
        """Model ``host``'s evaluations from now on: its targets and its told, evaluated and pending lists become
        this engine's own (the same lists), so that whatever ``host`` asks or is told, this engine sees.

        A composite engine keeps one such MLA per output (an
        :class:`~raytuner.engines.multiobjective.OutputModel`); they model, and
        are never asked or told themselves. Call it before either is told anything.

        Args:
            host: The engine whose evaluations this one models (over the same tasks).
        """
        if host.tasks != self.tasks:
            raise InvalidInputError("host", "a followed engine must have the same tasks", allowed=host.tasks)
        self.targets, self.evaluated, self.pending, self._records, self._source_uids = (
            host.targets,
            host.evaluated,
            host.pending,
            host._records,
            host._source_uids,
        )

    def scored_task(self, index: int) -> int:
        """The model task whose prediction scores the candidates for task ``index``: itself.

        GPTuneBand's multi-fidelity model scores every bracket's samples by
        the prediction at the highest fidelity.

        Args:
            index: The task a configuration is sought for.
        """
        return index

    def own_tasks(self, index: int) -> list[int]:
        """The model tasks that are task ``index``'s own data: itself (GPTuneBand's: its every level).

        Args:
            index: The task a configuration is sought for.
        """
        return [index]

    def own_model(self, index: int) -> FittedLCM | None:
        """The LCM of task ``index``'s own evaluations up to :meth:`fit_horizon` (``None``: none succeeded).

        Fitted afresh, seeded from the seed, the task and the horizon alone,
        so a replayed engine fits the same model; kept until the horizon moves.

        Args:
            index: The task a configuration is sought for.
        """
        horizon, own = self.fit_horizon(), self.own_tasks(index)
        key = (tuple(own), horizon)  # the model tasks with the same own data share one own model
        if key not in self._own:
            records = [r for r in self._records[:horizon] if self.task_index(r.task_parameter) in own]
            try:
                data, _ = TrainingData.from_records(
                    self.problem, [self.tasks[k] for k in own], records, self.objective.name
                )
            except InvalidInputError:  # no successful evaluation yet
                model = None
            else:
                stream = np.random.default_rng(np.random.SeedSequence([self.seed or 0, 6007, *own, horizon]))
                model = self.model.fit(data, seed=stream, executor=self.executor)
            self._own = {k: v for k, v in self._own.items() if k[1] == horizon}  # older horizons are done
            self._own[key] = model
        return self._own[key]

    def _acquisition_model(self, index: int, fitted: FittedLCM) -> tuple[FittedLCM, int, list[int] | None]:
        """The model task ``index``'s search scores by: the shared LCM, or the task's own (its turn, or it predicts
        the task's evaluations better; :mod:`raytuner.engines.sharing`).

        Returns the model, the scored task's position in it and the engine's
        task of each of its tasks (``None``: the shared model's own order). A
        suggestion of the task's own model says so in its provenance
        (``own_model: true``, an extra key).
        """
        target, own = self.scored_task(index), self.own_tasks(index)
        if self.sharing == "always" or len(own) == fitted.tasks:  # nothing shared: the task's own model already
            return fitted, target, None
        try:
            mine = self.own_model(index)
        except Exception:  # a numerical failure must not end a tuning run
            log.exception("%s: the own model of task %d failed; its search uses the shared model", self.name, index)
            return fitted, target, None
        if mine is None:
            return fitted, target, None
        mine_target = own.index(target)
        if not (self._own_turn(index, mine, mine_target) or own_predicts_better(fitted, target, mine, mine_target)):
            return fitted, target, None
        self._notes[OWN_MODEL] = True
        return mine, mine_target, own

    def _explores(self, index: int, mine: FittedLCM, target: int) -> bool:
        """Whether task ``index``'s next suggestion, chosen by its own model ``mine``, explores: goes where that
        model is least sure rather than where the acquisition points.

        MLA's own model explores while it holds fewer than ``n_initial`` of the
        task's evaluations: it completes the design a task did not get whole
        (a follower of ``design="staggered"``, whose first points are where the
        leaders agree; a design whose evaluations failed), so that the task's own
        search does not start from the other tasks' region alone. GPTuneBand's
        ``b_max`` samples do until their task holds
        :data:`~raytuner.engines.sharing.OWN_DESIGN` evaluations at ``b_max``.

        Args:
            index: The task a configuration is sought for.
            mine: The task's own model (:meth:`own_model`).
            target: The scored task's position in ``mine``.
        """
        return int(np.sum(mine.task == target)) < self.n_initial

    def _own_turn(self, index: int, mine: FittedLCM, target: int) -> bool:
        """Whether task ``index``'s next suggestion is its own model's turn: every :attr:`OWN_TURN`-th, where that
        model predicts the task's evaluations unseen well enough (:attr:`OWN_TURN_RHO`)."""
        if (len(self.evaluated[index]) + len(self.pending[index])) % self.OWN_TURN:
            return False
        if self.OWN_TURN_RHO is None:
            return True
        rho = loo_rank_correlation(mine, target)
        return rho is not None and rho >= self.OWN_TURN_RHO

    def propose(self, index: int) -> tuple[dict[str, Any], str]:
        """The configuration the model proposes for task ``index`` after its initial design, and how it was
        chosen: ``"model"``, or ``"random"`` while no model can be fitted.

        :meth:`ask` calls it; an engine that scores candidates otherwise
        (:class:`~raytuner.engines.multiobjective.MultiObjectiveMLA`) overrides it. What the search adds to
        the suggestion's provenance it leaves in ``self._notes``.

        Args:
            index: The task's position in :attr:`tasks`.
        """
        exclude = self.evaluated[index] + self.pending[index]
        rng = self._stream(index)
        try:
            fitted = self.fitted_model()
        except Exception:  # a numerical failure must not end a tuning run
            log.exception("model fit failed; suggesting a random configuration for task %d", index)
            fitted = None
        if fitted is None:
            config = sample_configurations(self.problem, self.tasks[index], 1, seed=rng, exclude=exclude)[0]
            return config, "random"
        chosen, target, tasks = self._acquisition_model(index, fitted)
        model = self.with_fantasies(chosen, tasks)
        sign = self.objective.sign()
        observed = sign * chosen.z[chosen.task == target]
        best = float(observed.min()) if len(observed) else float(np.min(sign * chosen.z))
        explore = tasks is not None and self._explores(index, chosen, target)
        if explore:
            self._notes[OWN_DESIGN_NOTE] = True

        def score(U: np.ndarray) -> np.ndarray:
            mean, variance = model.predict_standardised(target, U)
            if explore:
                return variance
            return self.acquisition(sign * mean, np.sqrt(variance), best)

        config, _ = optimize_acquisition(
            self.problem, self.tasks[index], score, rng=rng, exclude=exclude, search_candidates=self.search_candidates
        )
        return config, "model"

    # -- tell, replay, models ----------------------------------------------------------------------
    def add_pending(
        self, task: Mapping[str, Any], config: Mapping[str, Any], provenance: Provenance | None = None
    ) -> None:
        """Count an adopted trial as pending, a fantasy in the next search (:meth:`Engine.add_pending`)."""
        self.pending[self.task_index(task)].append(dict(config))

    def _admit(self, record: FunctionEvaluation) -> FunctionEvaluation:
        """Take ``record`` as it is, saying so when no suggestion in flight has its configuration.

        An evaluation that was not asked is still data of its task (the model
        uses it); the warning catches a configuration changed on its way
        back, which would leave the suggestion in flight.

        Args:
            record: The checked record, of one of the engine's tasks.
        """
        index = self._own_index(record.task_parameter)
        key = task_key(record.tuning_parameter)
        if not any(task_key(c) == key for c in self.pending[index]):
            log.warning(
                "%s: an evaluation of task %s at %s matches no suggestion in flight (%d in flight for "
                "this task); it is taken as extra data",
                self.name,
                dict(record.task_parameter),
                dict(record.tuning_parameter),
                len(self.pending[index]),
            )
        return record

    def _fold(self, record: FunctionEvaluation) -> None:
        """Fold an evaluation in (a failed one is remembered but never modelled; a repeated uid is ignored)."""
        key = task_key(record.task_parameter)
        index = next((i for i, t in enumerate(self.tasks) if task_key(t) == key), None)
        if index is None or record.uid in self._uids:
            return
        config = dict(record.tuning_parameter)
        self._uids.add(record.uid)
        self._records.append(record)
        self.evaluated[index].append(config)
        ckey = task_key(config)
        for j, pending in enumerate(self.pending[index]):
            if task_key(pending) == ckey:
                del self.pending[index][j]
                break
