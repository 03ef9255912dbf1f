"""Ray Tune's param_space, metric and mode on every raytuner face, on a real local Ray."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from ray_helpers import each_result
from record_helpers import known

ray = pytest.importorskip("ray")
from ray import tune  # noqa: E402
from raytuner.schedulers import GPTuneBandScheduler  # noqa: E402
from raytuner.searchers import (  # noqa: E402
    DiscreteBOSearcher,
    LCMSearcher,
    RandomSearcher,
    TLA2Searcher,
    TransferLearningSearcher,
)
from raytuner.searchers.param_space import space_from_ray  # noqa: E402

from raytuner.engines import BanditStructure  # noqa: E402
from raytuner.errors import InvalidInputError  # noqa: E402
from raytuner.problem.records import FunctionEvaluation  # noqa: E402
from raytuner.problem.space import ProblemSpace  # noqa: E402
from raytuner.store import JsonStore  # noqa: E402
from raytuner.test_problems import DEMO_PROBLEM, demo  # noqa: E402

pytestmark = pytest.mark.slow

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
#: Every sampler a searcher takes, a task key and constants (a plain value and a nested dict).
SPACE: dict[str, Any] = {
    "t": tune.grid_search([1.0, 2.0]),
    "x": tune.uniform(5, 6),
    "lr": tune.loguniform(1e-3, 1e-1),
    "n": tune.randint(1, 4),
    "alg": tune.choice(["lu", "qr"]),
    "scale": 3.0,
    "solver": {"name": "cg", "tol": 1e-6},
}
#: DiscreteBO's space: integer and categorical parameters only.
DISCRETE_SPACE: dict[str, Any] = {
    "t": tune.grid_search([1, 2]),
    "n": tune.randint(1, 5),
    "alg": tune.choice(["lu", "qr"]),
    "scale": 3.0,
    "solver": {"name": "cg", "tol": 1e-6},
}


def score(config: dict[str, Any]) -> float:
    """A made-up objective over SPACE's keys; reads the constants as the trainable gets them."""
    assert config["solver"] == {"name": "cg", "tol": 1e-6}  # passed through unchanged
    return (
        config["scale"] * (config.get("x", 5.3) - 5.3) ** 2
        + 0.1 * config.get("lr", 0.01)
        + config["n"]
        + (0.5 if config["alg"] == "qr" else 0.0)
        + config.get("t", 0.0)
    )


def trainable(config: dict[str, Any]) -> None:
    tune.report({"y": score(config)})


def fit(searcher: Any, space: dict[str, Any], samples: int, tmp_path: Path, **tune_config: Any) -> Any:
    tuner = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=samples, reuse_actors=True, **tune_config),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "ray"), verbose=0),
    )
    return tuner.fit()


def in_space(config: dict[str, Any], space: dict[str, Any]) -> bool:
    """Whether a trial's config lies in ``space`` (the samplers' ranges, the task grid, the constants)."""
    checks = {
        "t": lambda v: v in space["t"]["grid_search"],
        "x": lambda v: 5 <= v <= 6,
        "lr": lambda v: 1e-3 <= v <= 1e-1,
        "n": lambda v: isinstance(v, int) and space["n"].lower <= v < space["n"].upper,
        "alg": lambda v: v in ("lu", "qr"),
        "scale": lambda v: v == 3.0,
        "solver": lambda v: v == {"name": "cg", "tol": 1e-6},
    }
    return set(config) == set(space) and all(checks[k](v) for k, v in config.items())


def transfer_source() -> list[FunctionEvaluation]:
    """Source evaluations of a problem without task parameters over DISCRETE-free SPACE keys (x, lr, n, alg)."""
    rng = random.Random(0)
    configs: list[dict[str, Any]] = [
        {"x": 5 + rng.random(), "lr": 10 ** rng.uniform(-3, -1), "n": rng.randint(1, 3), "alg": rng.choice("lq")}
        for _ in range(12)
    ]
    return [
        FunctionEvaluation.create(
            {}, {**c, "alg": "lu" if c["alg"] == "l" else "qr"}, {"y": (c["x"] - 5.2) ** 2 + c["n"]}
        )
        for c in configs
    ]


CASES: dict[str, tuple[Any, dict[str, Any], list[str], dict[str, Any]]] = {
    "random": (RandomSearcher, SPACE, ["t"], {"seed": 0}),
    "lcm": (LCMSearcher, SPACE, ["t"], {"seed": 0, "engine_options": {"n_initial": 2}}),
    "discrete": (DiscreteBOSearcher, DISCRETE_SPACE, ["t"], {"seed": 0, "engine_options": {"n_initial": 2}}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_searcher_without_a_problem_tunes_the_tuners_param_space(local_ray: Any, tmp_path: Path, name: str) -> None:
    cls, space, task_keys, options = CASES[name]
    store = JsonStore(tmp_path / "store")
    searcher = cls.from_param_space(task_keys=task_keys, store=store, problem_name="p", **options)
    results = fit(searcher, space, 5, tmp_path, metric="y", mode="min")
    assert not results.errors and len(results) == 5
    assert all(in_space(r.config, space) for r in results)
    assert {r.config["t"] for r in results} == set(space["t"]["grid_search"])  # both tasks tuned
    assert searcher.problem.input_space.names == ["t"] and searcher.problem.objective("y").goal == "minimize"
    best = results.get_best_result()
    assert best.metrics["y"] == min(r.known_value("y") for r in store.evaluations("p"))
    per_task = searcher.best_per_task()
    assert [b.task_parameter for b in per_task] == [{"t": v} for v in space["t"]["grid_search"]]
    mine = searcher.best({"t": best.config["t"]})
    assert mine is not None and mine.value("y") == best.metrics["y"]
    assert all(best.config[k] == v for k, v in mine.tuning_parameter.items())


def test_a_transfer_searcher_takes_a_param_space_without_tasks(local_ray: Any, tmp_path: Path) -> None:
    space = {k: v for k, v in SPACE.items() if k != "t"}
    searcher = TransferLearningSearcher.from_param_space(
        source=transfer_source(), store=JsonStore(tmp_path / "store"), problem_name="p", seed=0
    )
    results = fit(searcher, space, 3, tmp_path, metric="y", mode="min")
    assert not results.errors and len(results) == 3
    best = results.get_best_result()
    assert searcher.best_per_task() == [searcher.best()] and searcher.best().value("y") == best.metrics["y"]


def test_mode_max_makes_the_goal_maximise_and_the_best_result_is_raytuners(local_ray: Any, tmp_path: Path) -> None:
    store = JsonStore(tmp_path / "store")
    searcher = RandomSearcher.from_param_space(task_keys=["t"], store=store, problem_name="p", seed=1)
    results = fit(searcher, SPACE, 4, tmp_path, metric="y", mode="max")
    assert searcher.problem.objective("y").goal == "maximize" and searcher.mode == "max"
    best = results.get_best_result()
    assert best.metrics["y"] == max(r.known_value("y") for r in store.evaluations("p"))
    assert searcher.best({"t": best.config["t"]}).value("y") == best.metrics["y"]


def test_a_searcher_built_from_a_param_space_at_once_runs_under_the_tuner(local_ray: Any, tmp_path: Path) -> None:
    searcher = RandomSearcher.from_param_space(
        SPACE, task_keys=["t"], metric="y", mode="min", store=JsonStore(tmp_path / "store"), problem_name="p"
    )
    assert searcher.session.engine.tasks == [{"t": 1.0}, {"t": 2.0}]
    results = fit(searcher, {}, 3, tmp_path, metric="y", mode="min")  # its constants come from the searcher
    assert not results.errors and all(in_space(r.config, SPACE) for r in results)


@pytest.mark.parametrize(
    ("metric", "mode", "field"),
    [
        ("y", "max", "mode: 'max' contradicts the objective 'y'"),
        ("z", "min", "metric: 'z' \\(mode 'min'\\) is not an optimised output"),
    ],
)
def test_a_metric_or_mode_against_the_problem_is_refused_in_one_line(
    local_ray: Any, tmp_path: Path, metric: str, mode: str | None, field: str
) -> None:
    searcher = RandomSearcher(PROBLEM, [{"t": 1.0}], JsonStore(tmp_path / "store"), "p", seed=0)
    with pytest.raises(InvalidInputError, match=f"^{field}") as caught:
        fit(searcher, {"scale": 3.0}, 2, tmp_path, metric=metric, mode=mode)
    assert "\n" not in str(caught.value)


def test_a_missing_metric_and_mode_are_the_problems_and_constants_pass_through(local_ray: Any, tmp_path: Path) -> None:
    store = JsonStore(tmp_path / "store")
    searcher = RandomSearcher(PROBLEM, [{"t": 1.0}], store, "p", seed=0)
    seen: list[dict[str, Any]] = []

    def reads_constants(config: dict[str, Any]) -> None:
        tune.report({"y": demo(config["x"], config["t"]) * config["scale"], "solver": config["solver"]["name"]})

    tuner = tune.Tuner(
        reads_constants,
        param_space={"scale": 2.0, "solver": {"name": "cg"}},
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=2, reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "ray"), verbose=0),
    )
    results = tuner.fit()
    seen = [known(r.config) for r in each_result(results)]
    assert (searcher.metric, searcher.mode) == ("y", "min")
    assert not results.errors and all(c["scale"] == 2.0 and c["solver"] == {"name": "cg"} for c in seen)
    best = results.get_best_result(metric="y", mode="min")
    assert searcher.best().value("y") == known(best.metrics)["y"]


def test_a_sampler_for_a_searcher_with_a_problem_never_reaches_the_trainable(local_ray: Any, tmp_path: Path) -> None:
    searcher = RandomSearcher(PROBLEM, [{"t": 1.0}], JsonStore(tmp_path / "store"), "p", seed=0)
    with pytest.raises(ValueError, match="unresolved parameters"):
        fit(searcher, {"extra": tune.uniform(0, 1)}, 2, tmp_path, metric="y", mode="min")


@pytest.mark.parametrize(
    ("space", "task_keys", "field"),
    [
        ({"x": tune.grid_search([1, 2])}, [], "param_space.x: tune.grid_search is for task keys"),
        ({"x": tune.randn()}, [], "param_space.x: unsupported sampler"),
        ({"x": {"deep": tune.uniform(0, 1)}}, [], "param_space.x: a sampler inside a nested value"),
        ({"t": tune.uniform(0, 1), "x": tune.uniform(0, 1)}, ["t"], "param_space.t: a task key takes"),
        ({"x": tune.uniform(0, 1)}, ["t"], "task_keys: 't' is not a key"),
        ({"k": 1}, [], "param_space: no tuning parameter"),
    ],
)
def test_a_param_space_raytuner_cannot_tune_is_refused_in_one_line(space: dict, task_keys: list, field: str) -> None:
    with pytest.raises(InvalidInputError, match=f"^{field}"):
        space_from_ray(space, "y", "min", task_keys=task_keys)


def test_tla2_from_a_param_space_without_a_new_task_is_refused_in_one_line(tmp_path: Path) -> None:
    # TLA2 tunes a task that is not among the source's: its task space comes from a problem
    with pytest.raises(InvalidInputError, match="^target_task: {} is already one of the source tasks"):
        TLA2Searcher.from_param_space(
            {
                "x": tune.uniform(5, 6),
                "lr": tune.loguniform(1e-3, 1e-1),
                "n": tune.randint(1, 4),
                "alg": tune.choice(["lu", "qr"]),
            },
            metric="y",
            mode="min",
            source=transfer_source(),
            store=JsonStore(tmp_path),
            problem_name="p",
        )


def test_quantised_and_log_samplers_map_to_raytuners_parameters() -> None:
    space = {"q": tune.quniform(0, 1, 0.25), "k": tune.lograndint(1, 64), "t": tune.choice(["a", "b"])}
    problem = space_from_ray(space, "y", "min", task_keys=["t"]).problem
    q, k = problem.parameter_space.parameters
    assert q.categories == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert (k.type, k.lower_bound, k.upper_bound, k.log) == ("integer", 1, 63, True)
    assert problem.input_space.parameters[0].categories == ["a", "b"]


def test_the_band_scheduler_and_its_searcher_answer_best_as_the_session_does(tmp_path: Path) -> None:
    band = GPTuneBandScheduler(
        PROBLEM,
        [{"t": 1.0}, {"t": 2.0}],
        JsonStore(tmp_path),
        "p",
        seed=0,
        structure=BanditStructure.hyperband(1, 4, 2),
    )
    searcher = band.searcher()
    assert searcher.best_per_task() == band.best_per_task() == band.session.best_per_task()
    assert searcher.best({"t": 2.0}) == band.best({"t": 2.0}) == band.session.best({"t": 2.0})
    with pytest.raises(InvalidInputError, match="^mode: 'max' contradicts the objective 'y'"):
        band.set_search_properties("y", "max")


def test_the_band_scheduler_from_a_param_space_refuses_constants_in_one_line(tmp_path: Path) -> None:
    space = {"t": tune.grid_search([1.0, 4.0]), "x": tune.uniform(0, 1), "scale": 2.0}
    with pytest.raises(InvalidInputError, match=r"^param_space: \['scale'\] are constants.*tune.with_parameters"):
        GPTuneBandScheduler.from_param_space(
            space, tmp_path, "band", task_keys=["t"], metric="y", mode="min", structure=BanditStructure((3, 1), 3)
        )
    assert not (tmp_path / "band.json").exists()  # refused before anything is stored
