"""The LCM's task weights: signed (GPTune's) or nonnegative (MLA's default)."""

from __future__ import annotations

import numpy as np
import pytest

from raytuner.engines import MLA
from raytuner.engines.gptuneband.sampler import LevelSampler
from raytuner.engines.multiobjective import MultiObjectiveMLA
from raytuner.engines.transfer.tla import TLA2
from raytuner.errors import InvalidInputError
from raytuner.models import GPTUNE_LCM, LCM, FittedLCM, Hyperparameters, LCMOptions, TrainingData
from raytuner.models.executors import InlineExecutor
from raytuner.models.options import TaskWeights
from raytuner.problem.space import ProblemSpace
from raytuner.test_problems import DEMO_PROBLEM, demo


def _opposed_tasks() -> TrainingData:
    """Two tasks whose values are each other's negatives."""
    X = np.linspace(0.0, 1.0, 12)[:, None]
    y = np.sin(6.0 * X[:, 0])
    return TrainingData([X, X], [y, -y])


def _fit(task_weights: TaskWeights, data: TrainingData) -> FittedLCM:
    return LCM(LCMOptions(latent=1, n_starts=2, task_weights=task_weights)).fit(data, seed=0, executor=InlineExecutor())


def test_signed_weights_model_opposed_tasks_and_nonnegative_ones_do_not() -> None:
    signed, nonnegative = _fit("signed", _opposed_tasks()), _fit("nonnegative", _opposed_tasks())
    assert signed.correlation()[0, 1] < -0.9
    assert (nonnegative.hyperparameters.W >= 0.0).all()
    assert nonnegative.correlation()[0, 1] >= 0.0


def test_a_model_of_one_task_is_fitted_the_same_with_either_weights() -> None:
    X = np.linspace(0.0, 1.0, 9)[:, None]
    data = TrainingData([X], [np.cos(4.0 * X[:, 0])])
    assert _fit("signed", data).hyperparameters == _fit("nonnegative", data).hyperparameters


def test_a_signed_warm_start_enters_a_nonnegative_fit_with_its_columns_turned() -> None:
    hp = Hyperparameters.initial(latent=2, tasks=3, dimension=1, rank=1)
    hp.W[0, :, 0] = [-0.4, -0.3, 0.2]  # mostly negative: negated, the 0.2 becomes 0
    hp.W[1, :, 0] = [0.5, -0.1, 0.3]  # mostly positive: kept, the -0.1 becomes 0
    clipped = hp.clipped(nonnegative=True)
    assert clipped.W[:, :, 0].tolist() == [[0.4, 0.3, 0.0], [0.5, 0.0, 0.3]]
    assert hp.clipped().W.tolist() == hp.W.tolist()
    bounds = Hyperparameters.vector_bounds(2, 3, 1, 1, nonnegative=True)
    assert bounds[2:8] == [(0.0, 10.0)] * 6 and Hyperparameters.vector_bounds(2, 3, 1, 1)[2] == (-10.0, 10.0)


def test_task_weights_are_checked_stored_and_read_back() -> None:
    with pytest.raises(
        InvalidInputError,
        match=r"^task_weights: unknown task weights 'positive' "
        r"\(allowed: signed, nonnegative\)$",
    ):
        LCMOptions(task_weights="positive")  # type: ignore[arg-type]  # not a TaskWeights: the refusal tested
    options = LCMOptions(task_weights="nonnegative")
    assert LCMOptions.from_dict(options.to_dict()) == options
    stored_before = {k: v for k, v in options.to_dict().items() if k != "task_weights"}
    assert LCMOptions.from_dict(stored_before).task_weights == "signed"  # as every model was fitted then
    assert LCMOptions.from_dict({"n_starts": 2}).task_weights is None  # a user's: the engine chooses
    assert LCMOptions(**GPTUNE_LCM).task_weights == "signed"


def test_mla_fits_nonnegative_weights_unless_told_and_the_other_engines_signed_ones() -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    tasks = [{"t": 1.0}, {"t": 2.0}]
    assert MLA(problem, tasks, seed=0).model.options.task_weights == "nonnegative"
    assert MLA(problem, tasks, seed=0, lcm=LCMOptions(n_starts=2)).model.options.task_weights == "nonnegative"
    assert MLA(problem, tasks, seed=0, lcm=LCMOptions(**GPTUNE_LCM)).model.options.task_weights == "signed"
    # GPTuneBand's samplers, TLA2 and multi-objective MLA keep GPTune's signed weights, given options or not
    assert LevelSampler.default_options.task_weights == "signed" and TLA2.default_options.task_weights == "signed"
    outputs = [{"name": "y", "goal": "minimize"}, {"name": "z", "goal": "minimize"}]
    several = ProblemSpace.parse({**DEMO_PROBLEM, "output_space": outputs})
    for options in (None, LCMOptions(n_starts=2)):
        engine = MultiObjectiveMLA(several, tasks, seed=0, lcm=options)
        assert {c.model.options.task_weights for c in [engine, *engine.components]} == {"signed"}
        assert engine.model.options.kernel == ("rbf" if options is None else "matern52")  # its measured model


def test_a_stored_model_of_signed_weights_is_fitted_again_by_an_engine_of_nonnegative_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    tasks = [{"t": 1.0}, {"t": 2.0}]
    signed = MLA(
        problem,
        tasks,
        seed=0,
        n_initial=3,
        lcm=LCMOptions(n_starts=1, task_weights="signed"),
        executor=InlineExecutor(),
    )
    records = []
    for _ in range(8):
        s = signed.ask()
        records.append(signed.tell(s, {"y": demo(s.config["x"], s.task["t"])}))
    models = signed.take_models()
    assert models and models[-1].modeling_options["task_weights"] == "signed"
    again = MLA(problem, tasks, seed=0, n_initial=3, lcm=LCMOptions(n_starts=1), executor=InlineExecutor())
    again.replay(records)
    again.restore_models(models, fixed=True)
    fitted = again.fitted_model()
    assert fitted is not None and fitted.report.optimised
    assert "has signed task weights, this engine nonnegative: fitting again" in caplog.text
    assert (fitted.hyperparameters.W >= 0.0).all()
