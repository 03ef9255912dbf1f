"""Surrogate models as GPTune ``surrogate_model`` records, and back to a predictor.

A record carries GPTune's fields as GPTune reads them (``Model_LCM``, the
flat hyperparameter list, the spaces with ``transformer`` and ``int`` types,
``objective_id``, ``model_stats.neg_log_likelihood``) and raytuner's own
details under the ``raytuner`` key (its modeler, hyperparameters by name,
spaces, the fit report). :func:`load_surrogate` rebuilds the fitted
model from a record and the stored evaluations it names, without refitting.

Example:
    >>> import numpy as np
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.problem.space import ProblemSpace, Space
    >>> from raytuner.models import LCM, LCMOptions, TrainingData
    >>> from raytuner.test_problems import DEMO_PROBLEM
    >>> problem, task = ProblemSpace.parse(DEMO_PROBLEM), {"t": 1.0}
    >>> records = [FunctionEvaluation.create(task, {"x": x}, {"y": np.sin(5 * x)}) for x in np.linspace(0, 1, 6)]
    >>> data, uids = TrainingData.from_records(problem, [task], records)
    >>> fitted = LCM(LCMOptions(n_starts=1)).fit(data, seed=0)
    >>> record = surrogate_record(fitted, problem, [task], uids, modeler="doc")
    >>> again = load_surrogate(record, records)
    >>> bool(np.allclose(again.predict(0, np.array([[0.3]]))[0], fitted.predict(0, np.array([[0.3]]))[0]))
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from raytuner.errors import InvalidInputError
from raytuner.models.data import TrainingData
from raytuner.models.fitted import FittedLCM
from raytuner.models.hyperparameters import Hyperparameters
from raytuner.models.lcm import LCM
from raytuner.models.options import UNSTORED_OPTIONS, FitReport, LCMOptions
from raytuner.problem.gptune_fields import BUDGET, OUTPUT_TRANSFORMER, parameter_transformer
from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord, task_key
from raytuner.problem.space import ProblemSpace, Space

__all__ = [
    "GPTUNE_MODELER",
    "RAYTUNER_MODELER",
    "gptune_space",
    "gptune_hyperparameters",
    "surrogate_record",
    "own_model",
    "load_surrogate",
    "model_tasks",
]


#: What GPTune calls an LCM surrogate (its ``Model_LCM``, whose flat hyperparameter list ours follows).
GPTUNE_MODELER = "Model_LCM"
#: The modeler of a model GPTune cannot rebuild, which it never finds as its own.
RAYTUNER_MODELER = "raytuner_LCM"
#: What GPy's exact inference adds to every noise variance of GPTune's ``Model_LCM`` (in output units).
GPY_JITTER = 1e-8


def gptune_space(space: Space) -> list[dict[str, Any]]:
    """``space`` as GPTune's ``problem_space_to_dict`` writes it (``name``, ``transformer``, ``type``, bounds).

    Args:
        space: a problem space (task, parameter or output space).

    >>> from raytuner.problem.space import Space
    >>> gptune_space(Space.model_validate([{"name": "n", "type": "integer", "lower_bound": 1, "upper_bound": 8}]))
    [{'name': 'n', 'transformer': 'normalize', 'type': 'int', 'lower_bound': 1, 'upper_bound': 8, 'optimize': True}]
    """
    out: list[dict[str, Any]] = []
    for p in space:
        if p.type == "categorical":
            out.append(
                {
                    "name": p.name,
                    "transformer": parameter_transformer(p.type),
                    "type": "categorical",
                    "categories": list(p.categories),
                }
            )
            continue
        integer = p.type == "integer"
        low, high = p.lower_bound, p.upper_bound
        out.append(
            {
                "name": p.name,
                "transformer": parameter_transformer(p.type),
                "type": "int" if integer else "real",
                "lower_bound": int(low) if integer else float(low),
                "upper_bound": int(high) if integer else float(high),
                "optimize": True,
            }
        )
    return out


def _gptune_outputs(problem: ProblemSpace) -> list[dict[str, Any]]:
    """The output entries as GPTune's example drivers declare outputs: no ``transform=``, so ``identity``."""
    return [
        {
            "name": o.name,
            "transformer": OUTPUT_TRANSFORMER,
            "type": "real",
            "lower_bound": float(o.lower_bound),
            "upper_bound": float(o.upper_bound),
            "optimize": o.optimize,
        }
        for o in problem.output_space
    ]


def _gptune_lengths(space: Space, compared: Sequence[int]) -> np.ndarray | None:
    """Per column, GPTune's length scale over ours, or ``None`` when a column is not on GPTune's coordinates.

    GPTune puts a real at ``(x − lo)/(hi − lo)``, an integer at
    ``(round(x) − lo)/(hi − lo)`` and the i-th of k categories at
    ``i/k + 0.01`` (of two: 0 and 1); raytuner puts integers and categories at
    their bins' centres. A log scale, an integer of one value, or more than
    two categories compared by category have no GPTune counterpart.
    """
    factors = []
    for column, p in enumerate(space):
        if p.type == "categorical":
            k = len(p.categories)
            if column in compared and k > 2:
                return None
            factors.append(2.0 if k == 2 and column not in compared else 1.0)
        elif p.log:
            return None
        elif p.type == "integer":
            n = p.upper_bound - p.lower_bound
            if n < 1:
                return None
            factors.append((n + 1) / n)
        else:
            factors.append(1.0)
    return np.asarray(factors)


def gptune_hyperparameters(fitted: FittedLCM, space: Space) -> list[float] | None:
    """The flat list GPTune's ``Model_LCM`` reads for ``fitted``, a model over ``space``; ``None`` if it has none.

    GPTune's order is ``theta`` (Q·d length scales), ``var`` (Q, here 1:
    the scale lives in ``B_q``), ``kappa`` (Q·m), ``sigma`` (m noise
    variances) and ``WS`` (Q·m), each latent function's block in turn.
    GPTune's model is an RBF LCM of rank 1 that conditions exactly on the raw
    outputs with a zero mean, on its own coordinates; raytuner's model of
    ``LCMOptions(**GPTUNE_LCM)`` is that model in its units, so the list
    holds its hyperparameters converted: each length scale to GPTune's
    coordinates, each task's ``W`` times the task's output scale ``s``,
    ``kappa`` and the noise (with the posterior's jitter) times ``s²``, the
    noise less :data:`GPY_JITTER`, which GPy adds back (the model's noise
    variance is at least that in output units:
    :class:`~raytuner.models.fitted.Standardisation`).
    Another model (a Matérn kernel, centred or log outputs, rank above 1,
    a sparse posterior, a log-scaled parameter) has no such list.

    Args:
        fitted: the fitted model.
        space: the space its inputs encode (the problem's parameter space).

    >>> import numpy as np
    >>> from raytuner.models import LCM, LCMOptions, GPTUNE_LCM, TrainingData
    >>> from raytuner.problem.space import Space
    >>> space = Space.model_validate([{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}])
    >>> data = TrainingData([np.linspace(0, 1, 5)[:, None]], [np.linspace(1, 2, 5)])
    >>> len(gptune_hyperparameters(LCM(LCMOptions(n_starts=1, **GPTUNE_LCM)).fit(data, seed=0), space))
    5
    >>> gptune_hyperparameters(LCM(LCMOptions(n_starts=1)).fit(data, seed=0), space) is None
    True
    """
    hp, options, transform = fitted.hyperparameters, fitted.options, fitted.transform
    latent, tasks, _, rank = hp.shape
    lengths = _gptune_lengths(space, options.categorical_columns)
    if (
        rank != 1
        or options.kernel != "rbf"
        or options.centre
        or transform.log_transform
        or not fitted.exact
        or lengths is None
        or hp.lengthscales.shape[1] != len(lengths)
    ):
        return None
    scale = np.asarray(transform.stds, dtype=float)
    variance = scale**2
    return [
        float(v)
        for v in np.concatenate(
            [
                (hp.lengthscales * lengths).ravel(),
                np.ones(latent),
                (hp.kappa * variance).ravel(),
                np.maximum((hp.noise + fitted.jitter) * variance - GPY_JITTER, 1e-300).ravel(),
                (hp.W[:, :, 0] * scale).ravel(),
            ]
        )
    ]


def surrogate_record(
    fitted: FittedLCM,
    problem: ProblemSpace,
    tasks: Sequence[Mapping[str, Any]],
    uids: Sequence[str],
    modeler: str,
    objective: str | None = None,
    sampler: Mapping[str, Any] | None = None,
    sources: Sequence[FunctionEvaluation] = (),
    levels: Mapping[str, Any] | None = None,
) -> SurrogateModelRecord:
    """The ``surrogate_model`` record of ``fitted``, trained on the evaluations ``uids``.

    GPTune's fields are spelled as GPTune writes and reads them (its spaces,
    ``Model_LCM``, the flat hyperparameter list, ``objective_id``,
    ``model_stats.neg_log_likelihood``); raytuner's own details (its
    modeler, the hyperparameters by name, the spaces with their options,
    the fit report) are under the ``raytuner`` key. A model of
    ``LCMOptions(**GPTUNE_LCM)`` is stored as GPTune's ``Model_LCM`` with its
    hyperparameters in GPTune's coordinates and output units
    (:func:`gptune_hyperparameters`), so GPTune's prediction from it is
    raytuner's; any other model is named ``raytuner_LCM``, so GPTune never
    loads it as its own. So is a model that learned from source evaluations
    (another problem's or the crowd's): the history file does not hold them,
    so GPTune could not rebuild it; they are kept in the record, as
    raytuner's ``sources``, so that :func:`load_surrogate` needs only the store.
    A model over GPTuneBand's fidelity levels is written in GPTune's band
    form: GPTune's fields have the task input ``budget`` first, each level's
    fidelity its value, as GPTune's GPTuneBand declares it (``budget_min −
    1e−12`` .. ``budget_max``) and as the file's records carry it
    (:mod:`raytuner.problem.gptune_fields`); raytuner's ``levels`` and
    ``task_parameters`` keep its own form (:func:`model_tasks`).

    Args:
        fitted: the fitted model.
        problem: the problem it models.
        tasks: its tasks' parameters, in model order.
        uids: the uids of the evaluations it was trained on.
        modeler: who made the model (an engine's name), stored as raytuner's modeler.
        objective: the modelled output (default: the first).
        sampler: which of the engine's samplers fitted it (GPTuneBand's pass and stage), kept as raytuner's
            ``sampler`` (default: none, the engine's only one).
        sources: the evaluations among ``uids`` that the store does not hold (the engine's source records).
        levels: where a task input is an evaluation's fidelity level (GPTuneBand's): ``{"name": the input,
            "fidelities": [B(0), ..., B(s_max)]}``; an evaluation at ``B(j)`` is of level ``j``, one without a
            fidelity of level 0.
    """
    spaces = problem.model_dump()
    spaces["output_space"] = [
        {k: v for k, v in o.items() if not (isinstance(v, float) and not math.isfinite(v))}
        for o in spaces["output_space"]
    ]  # JSON has no infinity
    name = problem.objective(objective).name
    objective_id = problem.objectives.index(name)
    flat = gptune_hyperparameters(fitted, problem.parameter_space)
    log_likelihood = float(fitted.log_likelihood)
    gradients = (
        fitted.log_likelihood_gradient().tolist()
        if fitted.report.optimised and fitted.report.approximation is None
        else None
    )
    own_tasks = [[t[n] for n in problem.input_space.names] for t in tasks]
    inputs, task_values = gptune_space(problem.input_space), own_tasks
    if levels is not None:
        band = _band_form(problem, tasks, levels)
        inputs, task_values = band if band is not None else (inputs, task_values)
    # GPTune rebuilds it from the file: its model, of the file's evaluations, over task inputs the records carry
    gptunes = flat is not None and not sources and (levels is None or task_values is not own_tasks)
    return SurrogateModelRecord(
        hyperparameters=flat if flat is not None else fitted.hyperparameters.to_vector().tolist(),
        modeling_options=fitted.options.to_dict(),
        model_stats={
            "log_likelihood": log_likelihood,
            "neg_log_likelihood": -log_likelihood,
            "gradients": gradients,
            "iterations": fitted.report.iterations,
        },
        task_parameters=task_values,
        function_evaluations=list(uids),
        input_space=inputs,
        parameter_space=gptune_space(problem.parameter_space),
        output_space=_gptune_outputs(problem),
        modeler=GPTUNE_MODELER if gptunes else RAYTUNER_MODELER,
        objective={**_gptune_outputs(problem)[objective_id], "objective_id": objective_id},
        objective_id=objective_id,
        log_likelihood=log_likelihood,
        raytuner={
            "modeler": modeler,
            "hyperparameters": fitted.hyperparameters.to_dict(),
            "spaces": spaces,
            "objective": name,
            "fit": {
                "approximation": fitted.report.approximation,
                "optimised_samples": fitted.report.optimised_samples,
                "likelihood_evaluations": fitted.report.evaluations,
                "starts": fitted.report.starts,
                "fit_seconds": fitted.report.seconds,
                "timed_out": fitted.report.timed_out,
                "executor": fitted.report.executor,
                "jitter": fitted.jitter,
                "samples": fitted.data.counts,
            },
            **({"sampler": dict(sampler)} if sampler is not None else {}),
            **({"sources": [_source_entry(r) for r in sources]} if sources else {}),
            **({"levels": dict(levels), "task_parameters": own_tasks} if levels is not None else {}),
        },
    )


def _band_form(
    problem: ProblemSpace, tasks: Sequence[Mapping[str, Any]], levels: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[list[Any]]] | None:
    """GPTune's input space and task values of a model over fidelity ``levels``: :data:`BUDGET` first, each
    level's fidelity its value (``None`` where the problem has an input named so of its own)."""
    name, fidelities = levels["name"], [float(b) for b in levels["fidelities"]]
    names = [n for n in problem.input_space.names if n != name]
    if BUDGET in names:
        return None
    budget = {
        "name": BUDGET,
        "transformer": parameter_transformer("real"),
        "type": "real",
        "lower_bound": min(fidelities) - 1e-12,  # GPTune_MB's Real(budget_min - 1e-12, budget_max)
        "upper_bound": max(fidelities),
        "optimize": True,
    }
    inputs = [budget, *(e for e in gptune_space(problem.input_space) if e["name"] != name)]
    return inputs, [[fidelities[t[name]], *(t[n] for n in names)] for t in tasks]


def model_tasks(record: SurrogateModelRecord) -> list[list[Any]]:
    """The task values of a stored model in raytuner's form (its spaces' input order): raytuner's own
    ``task_parameters`` where GPTune's differ (a model in GPTune's band form), else GPTune's.

    Args:
        record: a stored ``surrogate_model`` record.
    """
    own = own_model(record) or {}
    values = own.get("task_parameters")
    return values if isinstance(values, list) else record.task_parameters


def _source_entry(record: FunctionEvaluation) -> dict[str, Any]:
    """What :func:`load_surrogate` reads of a source evaluation kept in a model record."""
    return record.model_dump(include={"uid", "task_parameter", "tuning_parameter", "evaluation_result"})


def _at_levels(records: Sequence[FunctionEvaluation], levels: Mapping[str, Any]) -> list[FunctionEvaluation]:
    """``records`` with the task input ``levels["name"]`` set to each one's fidelity level, where it has none."""
    name, fidelities = levels.get("name"), levels.get("fidelities")
    if not isinstance(name, str) or not isinstance(fidelities, list):
        raise InvalidInputError("levels", "a model's levels need a name and a list of fidelities")
    placed = []
    for record in records:
        if name not in record.task_parameter:
            fidelity = record.raytuner.fidelity if record.raytuner is not None else None
            at = [j for j, b in enumerate(fidelities) if fidelity is not None and math.isclose(b, fidelity)]
            level = 0 if fidelity is None else next(iter(at), None)
            if level is None:
                raise InvalidInputError(
                    "levels", f"evaluation {record.uid} is at fidelity {fidelity:g}, of none of {fidelities}"
                )
            record = record.model_copy(update={"task_parameter": {**record.task_parameter, name: level}})
        placed.append(record)
    return placed


def own_model(record: SurrogateModelRecord) -> dict[str, Any] | None:
    """raytuner's description of a stored model (modeler, hyperparameters, spaces, objective, fit), or ``None``.

    Records written before the ``raytuner`` key kept these at the top level;
    they are read as well. A model of another tool is ``None``.

    Args:
        record: a stored ``surrogate_model`` record.
    """
    own = getattr(record, "raytuner", None)
    if isinstance(own, Mapping):
        return dict(own)
    if isinstance(record.hyperparameters, Mapping) and record.modeler.startswith("raytuner"):
        stats = record.model_stats
        return {
            "modeler": record.modeler,
            "hyperparameters": dict(record.hyperparameters),
            "spaces": {
                "input_space": record.input_space,
                "parameter_space": record.parameter_space,
                "output_space": record.output_space,
            },
            "objective": (record.objective or {}).get("name"),
            "fit": dict(stats),
        }
    return None


def load_surrogate(record: SurrogateModelRecord, evaluations: Sequence[FunctionEvaluation]) -> FittedLCM:
    """The model of ``record`` conditioned on its evaluations (found by uid among ``evaluations``).

    Raises :class:`~raytuner.errors.InvalidInputError` naming what is
    missing when the record is not a raytuner LCM record or evaluations are absent.

    Args:
        record: a ``surrogate_model`` record of a raytuner LCM.
        evaluations: evaluations that include those it was trained on.
    """
    own = own_model(record)
    if own is None:
        raise InvalidInputError("surrogate_model", f"a {record.modeler} model of another tool, not a raytuner LCM")
    problem = ProblemSpace.parse(own["spaces"], "surrogate_model")
    hp = Hyperparameters.from_dict(own["hyperparameters"] or {})
    known = {k: v for k, v in record.modeling_options.items() if k in LCMOptions.__dataclass_fields__}
    options = LCMOptions(**{**UNSTORED_OPTIONS, **known})
    wanted = set(record.function_evaluations)
    kept = [FunctionEvaluation.model_validate(e) for e in own.get("sources") or []]  # the store holds none
    used = list({e.uid: e for e in [*kept, *evaluations] if e.uid in wanted}.values())
    if isinstance(own.get("levels"), Mapping):
        used = _at_levels(used, own["levels"])
    if len(used) != len(wanted):
        raise InvalidInputError(
            "function_evaluations",
            f"{len(wanted) - len(used)} of the model's {len(wanted)} evaluations are not in the store",
        )
    tasks = [dict(zip(problem.input_space.names, values)) for values in model_tasks(record)]
    by_uid = {e.uid: e for e in used}
    ordered = [by_uid[u] for u in record.function_evaluations]
    data, _ = TrainingData.from_records(problem, tasks, ordered, own.get("objective"))
    if len({task_key(t) for t in tasks}) != hp.shape[1]:
        raise InvalidInputError("task_parameters", "the record's tasks do not match its hyperparameters")
    fit = own.get("fit") or {}
    optimised = fit.get("optimised_samples")
    report = FitReport(
        seconds=float(fit.get("fit_seconds", 0.0)),
        iterations=int(record.model_stats.get("iterations", fit.get("iterations", 0)) or 0),
        optimised_samples=optimised if isinstance(optimised, int) else None,
        timed_out=bool(fit.get("timed_out", False)),
        executor=fit.get("executor"),
    )
    return FittedLCM.condition(options, data, LCM(options).standardisation(data), hp, report)
