"""Surrogate models as GPTune ``surrogate_model`` records, and back to a predictor.

A record keeps the hyperparameters, the log-likelihood and its gradient, the
iterations, the uids of the evaluations used, the task parameters, the three
spaces and the modeler's name. :func:`load_surrogate` rebuilds the fitted
model from a record and the stored evaluations it names, without refitting.

Example:
    >>> import numpy as np
    >>> from raytuner.records import FunctionEvaluation
    >>> from raytuner.space import ProblemSpace
    >>> from raytuner.models import LCM, LCMOptions, TrainingData
    >>> from raytuner.testing.functions import DEMO_PROBLEM
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
from typing import Any, Mapping, Sequence

from raytuner.errors import InvalidInputError
from raytuner.models.data import TrainingData
from raytuner.models.fitted import FittedLCM
from raytuner.models.hyperparameters import Hyperparameters
from raytuner.models.lcm import LCM
from raytuner.models.options import FitReport, LCMOptions
from raytuner.records import FunctionEvaluation, SurrogateModelRecord, task_key
from raytuner.space import ProblemSpace

__all__ = ["surrogate_record", "load_surrogate"]


def surrogate_record(fitted: FittedLCM, problem: ProblemSpace, tasks: Sequence[Mapping[str, Any]],
                     uids: Sequence[str], modeler: str, objective: str | None = None) -> SurrogateModelRecord:
    """The ``surrogate_model`` record of ``fitted``, trained on the evaluations ``uids``.

    Args:
        fitted: the fitted model.
        problem: the problem it models.
        tasks: its tasks' parameters, in model order.
        uids: the uids of the evaluations it was trained on.
        modeler: who made the model (a strategy's name), stored as the record's modeler.
        objective: the modelled output (default: the first).
    """
    spaces = problem.model_dump()
    spaces["output_space"] = [{k: v for k, v in o.items() if not (isinstance(v, float) and not math.isfinite(v))}
                              for o in spaces["output_space"]]   # JSON has no infinity
    return SurrogateModelRecord(
        hyperparameters=fitted.hyperparameters.to_dict(),
        modeling_options=fitted.options.to_dict(),
        model_stats={"log_likelihood": fitted.log_likelihood,
                     "gradients": (fitted.log_likelihood_gradient().tolist()
                                   if fitted.report.optimised and fitted.report.approximation is None else None),
                     "approximation": fitted.report.approximation,
                     "optimised_samples": fitted.report.optimised_samples,
                     "iterations": fitted.report.iterations, "likelihood_evaluations": fitted.report.evaluations,
                     "starts": fitted.report.starts, "fit_seconds": fitted.report.seconds,
                     "jitter": fitted.jitter, "samples": fitted.data.counts},
        task_parameters=[[t[name] for name in problem.input_space.names] for t in tasks],
        function_evaluations=list(uids),
        input_space=spaces["input_space"], parameter_space=spaces["parameter_space"],
        output_space=spaces["output_space"], modeler=modeler,
        objective={"name": problem.objective(objective).name},
    )


def load_surrogate(record: SurrogateModelRecord, evaluations: Sequence[FunctionEvaluation]) -> FittedLCM:
    """The model of ``record`` conditioned on its evaluations (found by uid among ``evaluations``).

    Raises :class:`~raytuner.errors.InvalidInputError` naming what is
    missing when the record is not an LCM record or evaluations are absent.

    Args:
        record: a ``surrogate_model`` record of an LCM.
        evaluations: evaluations that include those it was trained on.
    """
    problem = ProblemSpace.parse({"input_space": record.input_space, "parameter_space": record.parameter_space,
                                  "output_space": record.output_space}, "surrogate_model")
    hp = Hyperparameters.from_dict(record.hyperparameters or {})
    known = {k: v for k, v in record.modeling_options.items() if k in LCMOptions.__dataclass_fields__}
    options = LCMOptions(**known)
    wanted = set(record.function_evaluations)
    used = [e for e in evaluations if e.uid in wanted]
    if len(used) != len(wanted):
        raise InvalidInputError("function_evaluations", f"{len(wanted) - len(used)} of the model's "
                                                        f"{len(wanted)} evaluations are not in the store")
    tasks = [dict(zip(problem.input_space.names, values)) for values in record.task_parameters]
    by_uid = {e.uid: e for e in used}
    ordered = [by_uid[u] for u in record.function_evaluations]
    data, _ = TrainingData.from_records(problem, tasks, ordered, (record.objective or {}).get("name"))
    if len({task_key(t) for t in tasks}) != hp.shape[1]:
        raise InvalidInputError("task_parameters", "the record's tasks do not match its hyperparameters")
    optimised = record.model_stats.get("optimised_samples")
    report = FitReport(seconds=float(record.model_stats.get("fit_seconds", 0.0)),
                       iterations=int(record.model_stats.get("iterations", 0)),
                       optimised_samples=optimised if isinstance(optimised, int) else None)
    return FittedLCM.condition(options, data, LCM(options).standardisation(data), hp, report)
