"""The GPTuneBand examples' objectives and engine loops (no Ray): PyAMG solve times and MLP epochs."""

from __future__ import annotations

import doctest
import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from model_helpers import FAST

from raytuner.models.executors import InlineExecutor
from raytuner.problem.space import ProblemSpace

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` by path (examples/ is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))  # as `python examples/NAME.py` has it: for examples/_extras.py
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickle look classes up by module
    spec.loader.exec_module(module)
    return module


amg = load_example("amg_tuning")
hpo = load_example("sklearn_hpo")

GOOD = dict(
    strength=0.25,
    method="ruge_stuben",
    coarsening="RS",
    interpolation="classical",
    aggregate="standard",
    smoother="gauss_seidel",
    relax_weight=1.0,
    pre_sweeps=1,
    post_sweeps=1,
    max_coarse=20,
    cycle="V",
    accel="none",
)
MLP = {"hidden_units": 32, "alpha": 1e-4, "learning_rate_init": 1e-2, "batch_size": 64, "activation": "relu"}


def test_the_examples_docstrings_run() -> None:
    result = doctest.testmod(hpo)  # examples/ is outside pytest's doctest paths (amg's are in benchmarks)
    assert result.attempted and not result.failed


# -- PyAMG objective ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        GOOD,
        {**GOOD, "method": "smoothed_aggregation", "accel": "fgmres"},
        {**GOOD, "smoother": "sor", "relax_weight": 1.2, "cycle": "W", "accel": "bicgstab"},
    ],
)
def test_a_reasonable_amg_config_converges_in_positive_time(config: dict) -> None:
    assert amg.solve_time({"a": 5.0, "c": 1.0}, config, k=10) > 0


def test_the_matrix_is_an_m_matrix_with_upwind_convection() -> None:
    A = amg.convection_diffusion(6, a=10.0, c=0.5)
    off = A - np.diag(A.diagonal())
    assert A.shape == (216, 216) and (A.diagonal() > 0).all() and off.max() <= 0
    assert (np.asarray(A.sum(axis=1)).ravel() >= -1e-9).all()  # weakly diagonally dominant rows


def test_fidelity_maps_to_k_cubed_linearly() -> None:
    ks = [amg.fidelity_to_k(b, 1, 8, 10, 40) for b in (1, 8)]
    assert ks == [10, 40]
    mid = amg.fidelity_to_k(4.5, 1, 8, 10, 40) ** 3
    assert mid == pytest.approx((10**3 + 40**3) / 2, rel=0.1)


@pytest.mark.parametrize(
    "config, kwargs, reason",
    [
        (GOOD, {"maxiter": 1}, "stalled"),  # a forced tiny iteration limit
        ({**GOOD, "coarsening": "nonsense"}, {}, "error"),  # PyAMG raises in the setup
        (GOOD, {"time_limit": 1e-4}, "timeout"),  # the watchdog stops the setup
    ],
)
def test_a_bad_amg_solve_raises_solve_failure_only(config: dict, kwargs: dict, reason: str) -> None:
    with pytest.raises(amg.SolveFailure) as info:
        amg.solve_time({"a": 5.0, "c": 1.0}, config, k=10, **kwargs)
    assert info.value.reason.startswith(reason)


def test_the_constraints_keep_amli_cycles_where_pyamg_takes_them() -> None:
    problem = ProblemSpace.parse(amg.AMG_PROBLEM)
    amli = {**GOOD, "cycle": "AMLI", "accel": "fgmres"}
    assert problem.is_valid({"a": 5.0, "c": 1.0}, amli)
    assert not problem.is_valid({"a": 5.0, "c": 1.0}, {**amli, "accel": "bicgstab"})
    assert not problem.is_valid({"a": 5.0, "c": 1.0}, {**amli, "method": "smoothed_aggregation"})
    assert problem.is_valid({"a": 0.0, "c": 1.0}, {**amli, "method": "smoothed_aggregation"})


def test_a_short_band_run_over_the_amg_objective_records_failures_as_failures() -> None:
    args = amg.parse_args(["--quick", "--tasks", "5", "1", "--k-min", "4", "--k-max", "8", "--time-limit", "5"])
    calls: list[int] = []

    def evaluate(task: dict, config: dict, k: int) -> float:
        calls.append(k)
        # every third solve gets an unreachable tolerance: a stalled solve, which must not end the run
        return amg.solve_time(
            task, config, k, tol=1e-30 if len(calls) % 3 == 0 else amg.TOL, maxiter=20, time_limit=args.time_limit
        )

    band, records = amg.run_engine(
        ProblemSpace.parse(amg.AMG_PROBLEM),
        args.task_list,
        args,
        evaluate=evaluate,
        executor=InlineExecutor(),
        lcm=FAST,
    )
    assert band.finished and len(records) == len(calls)
    assert set(calls) == {4, 6, 8}  # k of b = 1, 2, 4
    failed = [r for r in records if r.status != "ok"]
    assert failed and all(r.value("runtime") is None and r.raytuner.failure_message for r in failed)
    assert all(r.value("runtime") > 0 for r in records if r.status == "ok")
    assert not {r.raytuner.parent for r in records} & {r.uid for r in failed}
    best = band.best_per_task()[0]
    assert best is None or best.raytuner.fidelity == args.b_max


def _mt19937_keys() -> np.ndarray:
    """The key of numpy's global generator (its legacy state is a tuple: name, key, position, ...)."""
    state = np.random.get_state()
    assert isinstance(state, tuple)
    return np.array(state[1])


@pytest.mark.parametrize(
    "config",
    [{**GOOD, "coarsening": "PMIS"}, {**GOOD, "method": "smoothed_aggregation", "aggregate": "lloyd"}],
    ids=["PMIS", "lloyd"],
)  # unseeded, their work varies by a few per cent per solve
def test_a_solve_repeats_though_pyamg_draws_from_numpys_global_generator(config: dict) -> None:
    np.random.seed(123)
    caller = _mt19937_keys()
    works = [amg.solve_work({"a": 5.0, "c": 1.0}, config, k=10) for _ in range(3)]
    assert works[0] > 0 and works == [works[0]] * 3
    assert (_mt19937_keys() == caller).all()  # the caller's stream is left as it was


def test_two_seed_0_band_runs_over_the_amg_work_leave_the_same_records() -> None:
    args = amg.parse_args(
        [
            "--quick",
            "--runner",
            "engine",
            "--objective",
            "work",
            "--tasks",
            "5",
            "1",
            "8",
            "0.7",
            "--k-min",
            "4",
            "--k-max",
            "8",
            "--budget",
            "8",
            "--time-limit",
            "30",
        ]
    )
    problem = ProblemSpace.parse(amg.amg_problem("work"))

    def evaluate(task: dict, config: dict, k: int) -> float:
        # half the space stalls (an unreachable tolerance): failures must replay the same way
        return amg.solve_work(task, config, k, tol=1e-30 if config["strength"] > 0.45 else amg.TOL, maxiter=20)

    runs = [
        amg.run_engine(problem, args.task_list, args, evaluate=evaluate, executor=InlineExecutor(), lcm=FAST)
        for _ in range(2)
    ]
    (first_band, first), (second_band, second) = runs
    assert [(r.task_parameter, r.tuning_parameter, r.evaluation_result, r.raytuner.fidelity) for r in first] == [
        (r.task_parameter, r.tuning_parameter, r.evaluation_result, r.raytuner.fidelity) for r in second
    ]
    assert first_band.cost_per_task() == second_band.cost_per_task()
    assert all(c <= 8 + 1e-9 for c in first_band.cost_per_task()) and first_band.finished
    assert any(r.status == "failed" for r in first) and any(r.raytuner.proposer == "model" for r in first)


# -- scikit-learn epochs -----------------------------------------------------------------------------


def test_validation_accuracy_improves_over_epochs() -> None:
    trainer = hpo.EpochTrainer("digits", MLP)
    first = trainer.train_epoch()
    later = trainer.train_to(6)
    assert trainer.epoch == 6 and later > first and later > 0.9


def test_a_checkpoint_round_trips_and_resumed_training_matches(tmp_path: Path) -> None:
    _, X_val, _, _ = hpo.load_split("breast_cancer")
    trainer = hpo.EpochTrainer("breast_cancer", MLP, seed=3)
    trainer.train_to(2)
    trainer.save(tmp_path)
    restored = hpo.EpochTrainer.restore(tmp_path)
    assert restored.epoch == 2 and restored.config == trainer.config
    np.testing.assert_array_equal(restored.model.predict_proba(X_val), trainer.model.predict_proba(X_val))
    trainer.train_to(4)
    restored.train_to(4)  # the same epochs, in the same permutations, from the checkpoint
    np.testing.assert_array_equal(restored.model.predict_proba(X_val), trainer.model.predict_proba(X_val))


def test_a_short_band_run_over_mlp_epochs_continues_promotions() -> None:
    args = hpo.parse_args(["--datasets", "breast_cancer", "--b-max", "4", "--eta", "2"])
    band, records = hpo.run_engine(
        ProblemSpace.parse(hpo.SKLEARN_PROBLEM),
        [{"dataset": "breast_cancer"}],
        args,
        executor=InlineExecutor(),
        lcm=FAST,
    )
    assert band.finished and all(r.status == "ok" for r in records)
    assert Counter(r.additional_output["epoch"] for r in records) == Counter(r.raytuner.fidelity for r in records)
    promotions = [r for r in records if r.raytuner.parent]
    assert promotions
    assert band.cost_per_task() == pytest.approx([band.structure.cost_per_pass("iterative")])
    assert band.best_per_task()[0].value("val_accuracy") > 0.9
