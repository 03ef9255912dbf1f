"""Engines by name: the one way a face (the gRPC service, a Ray searcher or scheduler, the CLI) builds one.

:data:`ENGINES` knows every engine and what it needs besides its options:

- ``"executor"``: it fits models, and runs their multi-start fits on the
  executor it is given (Ray actors, a process pool, inline); without one each
  fit picks the default for its size (:func:`raytuner.models.executors.default_executor`);
- ``"source"``: it transfers from source data (an
  :class:`~raytuner.problem.records.EvaluationSource` such as
  :class:`raytuner.store.StoreSource`, a list of
  :class:`~raytuner.problem.records.FunctionEvaluation`, or for ``transfer`` a shared
  :class:`~raytuner.engines.transfer.SourceData`), and tunes one target task;
- ``"sources"``: it may learn from source data too (the crowd's records), as
  extra tasks of its model, and tunes any number of tasks;
- ``"fidelities"``: it is multi-fidelity; its options give the bandit
  structure and it offers what :class:`~raytuner.engines.MultiFidelityEngine`
  names.

A face builds any engine from an :class:`EngineSpec` plus what it has
(:func:`build_engine`); every engine knows its own spec
(:attr:`Engine.spec <raytuner.engines.Engine.spec>`), so a face
rebuilds a fresh one (to replay a store after a restore) with
:func:`fresh_engine` instead of copying a blank engine.

Example:
    >>> from raytuner.problem.space import ProblemSpace
    >>> problem = ProblemSpace.parse({
    ...     "parameter_space": [{"name": "bx", "type": "categorical", "categories": [32, 64, 128]}],
    ...     "output_space": [{"name": "time"}]})
    >>> engine = build_engine(EngineSpec("discrete", {"n_initial": 2}), problem, [{}], seed=0)
    >>> engine.spec, sorted(ENGINES)
    (EngineSpec(name='discrete', options={...'n_initial': 2...}), ['discrete', 'gptuneband', 'mla', 'random', 'tla1', 'tla2', 'transfer'])
    >>> fresh_engine(engine).ask().config == engine.ask().config
    True
    >>> build_engine(EngineSpec("bogus"), problem, [{}])
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: engine: unknown engine 'bogus' (allowed: discrete, gptuneband, mla, random, tla1, tla2, transfer)
    >>> build_engine(EngineSpec("discrete", {"n_initail": 2}), problem, [{}])
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: options: discrete takes no option 'n_initail' (allowed: acquisitions, avoid_failures, candidates, discount_factor, exploration, improvement_factor, kernel, lengthscale, method, n_initial, objective, skip_threshold)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from raytuner.engines.base import Engine
from raytuner.engines.discrete import DiscreteBO
from raytuner.engines.gptuneband.engine import GPTuneBand
from raytuner.engines.gptuneband.options import GPTuneBandOptions
from raytuner.engines.mla import MLA
from raytuner.engines.multiobjective import MultiObjectiveMLA, mla_engine
from raytuner.engines.random_search import RandomSearch
from raytuner.engines.spec import EngineSpec
from raytuner.engines.transfer import TLA2, TLA1Engine, TransferLearning
from raytuner.errors import InvalidInputError
from raytuner.models import Hyperparameters, LCMOptions
from raytuner.models.executors import Executor
from raytuner.problem.space import ProblemSpace

__all__ = ["ENGINES", "EngineEntry", "Need", "build_engine", "fresh_engine"]

#: What an engine needs besides its options (see the module docstring).
Need = Literal["executor", "source", "sources", "fidelities"]

#: ``(problem, tasks, seed, source, options) -> engine``; the options include the executor when there is one.
Builder = Callable[[ProblemSpace, list[dict[str, Any]], "int | None", Any, dict[str, Any]], Engine]

_MLA_OPTIONS = (
    "n_initial",
    "design",
    "lcm",
    "acquisition",
    "acquisition_options",
    "batch",
    "objective",
    "search_candidates",
    "sharing",
)


@dataclass(frozen=True)
class EngineEntry:
    """One engine of the registry: its class, its option names and what else it needs.

    Args:
        engine: The engine's class.
        options: The names of its keyword options (the executor and the source are not options).
        needs: What it needs besides its options (:data:`Need`).
        build: Builds it from ``(problem, tasks, seed, source, options)``; default:
            ``engine(problem, tasks, seed, **options)``.
        variants: Other classes ``build`` makes by this name, for some problems.
    """

    engine: type[Engine]
    options: tuple[str, ...]
    needs: frozenset[Need] = frozenset()
    build: Builder | None = None
    variants: tuple[type[Engine], ...] = ()

    @property
    def learns_from_sources(self) -> bool:
        """Whether the engine learns from source data: it must (``source``) or may (``sources``)."""
        return bool(self.needs & {"source", "sources"})


def _transfer(
    problem: ProblemSpace, tasks: list[dict[str, Any]], seed: int | None, source: Any, options: dict[str, Any]
) -> Engine:
    return TransferLearning(problem, tasks[0], source, seed=seed, **options)


def _mla(
    problem: ProblemSpace, tasks: list[dict[str, Any]], seed: int | None, source: Any, options: dict[str, Any]
) -> Engine:
    return mla_engine(problem, tasks, seed, source=source, **options)


def _band(
    problem: ProblemSpace, tasks: list[dict[str, Any]], seed: int | None, source: Any, options: dict[str, Any]
) -> Engine:
    return GPTuneBand(problem, tasks, seed, source=source, **options)


def _tla1(
    problem: ProblemSpace, tasks: list[dict[str, Any]], seed: int | None, source: Any, options: dict[str, Any]
) -> Engine:
    return TLA1Engine(problem, tasks, seed, source, **options)


def _tla2(
    problem: ProblemSpace, tasks: list[dict[str, Any]], seed: int | None, source: Any, options: dict[str, Any]
) -> Engine:
    return TLA2(problem, tasks[0], source, seed, **options)


#: Every engine by the name a face builds it by.
ENGINES: dict[str, EngineEntry] = {
    "random": EngineEntry(RandomSearch, ()),
    "mla": EngineEntry(
        MLA, _MLA_OPTIONS, frozenset({"executor", "sources"}), _mla, (MultiObjectiveMLA,)
    ),  # several objectives
    "gptuneband": EngineEntry(
        GPTuneBand,
        GPTuneBandOptions.names(),
        frozenset({"executor", "fidelities", "sources"}),
        _band,
    ),
    "discrete": EngineEntry(
        DiscreteBO,
        (
            "method",
            "n_initial",
            "kernel",
            "lengthscale",
            "exploration",
            "acquisitions",
            "skip_threshold",
            "discount_factor",
            "improvement_factor",
            "candidates",
            "objective",
            "avoid_failures",
        ),
    ),
    "transfer": EngineEntry(
        TransferLearning,
        (
            "algorithm",
            "pool",
            "weights",
            "candidates",
            "lcm",
            "acquisition",
            "acquisition_options",
            "objective",
            "search_candidates",
        ),
        frozenset({"executor", "source"}),
        _transfer,
    ),
    "tla1": EngineEntry(TLA1Engine, ("objective", "lcm"), frozenset({"executor", "source"}), _tla1),
    "tla2": EngineEntry(TLA2, (*_MLA_OPTIONS, "source_model", "refit"), frozenset({"executor", "source"}), _tla2),
}


#: Options given as plain data that an engine takes as an object: the object's class, and how one is made.
_DECODERS: dict[str, tuple[type, Callable[[Mapping[str, Any]], Any]]] = {
    "lcm": (LCMOptions, LCMOptions.from_dict),
    "source_model": (Hyperparameters, Hyperparameters.from_dict),
}


def _decode(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(options)
    for key, (kind, decode) in _DECODERS.items():
        value = out.get(key)
        if isinstance(value, Mapping):
            try:
                out[key] = decode(value)
            except TypeError as exc:  # an unknown field of LCMOptions
                raise InvalidInputError(f"options.{key}", f"{name}: {exc}") from None
        elif value is not None and not isinstance(value, kind):
            raise InvalidInputError(f"options.{key}", f"{name}: expected an object of fields, got {value!r}")
    return out


def build_engine(
    spec: EngineSpec,
    problem: ProblemSpace,
    tasks: Sequence[Mapping[str, Any]],
    seed: int | None = None,
    *,
    executor: Executor | None = None,
    source: Any = None,
) -> Engine:
    """The engine ``spec`` names, over ``tasks``, given what the face has.

    The executor goes only to engines that fit models, the source only to
    those that transfer or may (see :data:`ENGINES`); either is ignored by the others.

    Args:
        spec: The engine's registered name and options.
        problem: The problem's spaces.
        tasks: The tasks to tune (one target task for an engine that needs a source).
        seed: Seeds the engine.
        executor: Runs model fits (default: the engine's own choice).
        source: The source data of an engine that transfers (or may: default ``None``, none).

    Raises:
        InvalidInputError: An unknown name (``engine``) or option (``options``), more than one task
            for an engine that transfers (``tasks``), no source for it (``source``), or an option the
            engine refuses; one line that names the field and the allowed values.
    """
    entry = ENGINES.get(spec.name)
    if entry is None:
        raise InvalidInputError("engine", f"unknown engine {spec.name!r}", allowed=sorted(ENGINES))
    if (
        "options" in spec.options and "lcm" in entry.options and "lcm" not in spec.options
    ):  # as specs stored before named it
        spec = EngineSpec(spec.name, {("lcm" if k == "options" else k): v for k, v in spec.options.items()})
    unknown = sorted(set(spec.options) - set(entry.options))
    if unknown:
        raise InvalidInputError("options", f"{spec.name} takes no option {unknown[0]!r}", allowed=sorted(entry.options))
    targets = [dict(t) for t in tasks]
    if "source" in entry.needs:
        if len(targets) != 1:
            raise InvalidInputError("tasks", f"the {spec.name} engine tunes one target task, not {len(targets)}")
        if source is None:
            raise InvalidInputError(
                "source",
                f"the {spec.name} engine transfers from source data: pass an EvaluationSource "
                f"(such as raytuner.store.StoreSource) or a list of records",
            )
    options = _decode(spec.name, spec.options)
    if "executor" in entry.needs and executor is not None:
        options["executor"] = executor
    try:
        if entry.build is not None:
            return entry.build(problem, targets, seed, source, options)
        return entry.engine(problem, targets, seed, **options)
    except InvalidInputError:
        raise
    except (TypeError, ValueError) as exc:  # an option value of the wrong kind
        raise InvalidInputError("options", f"{spec.name}: {exc}") from None


def fresh_engine(engine: Engine) -> Engine:
    """A new engine built as ``engine`` was (same spec, problem, tasks, seed, executor and source), told nothing.

    A face replays its store into it after a restore, instead of copying a blank engine.

    Args:
        engine: Any registered engine (of the class :data:`ENGINES` builds by its name).

    Raises:
        InvalidInputError: ``engine`` is of a class the registry does not build by its name
            (a subclass, or an engine of one's own): its spec cannot rebuild it.
    """
    entry = ENGINES.get(engine.name)
    built_by_name = entry is not None and (type(engine) is entry.engine or type(engine) in entry.variants)
    if not built_by_name:
        raise InvalidInputError(
            "engine",
            f"{type(engine).__name__} is not a registered engine, so its spec cannot rebuild it; add it to ENGINES",
            allowed=sorted(ENGINES),
        )
    return build_engine(
        engine.spec,
        engine.problem,
        engine.spec_tasks,
        engine.seed,
        executor=engine.executor,
        source=engine.source,
    )
