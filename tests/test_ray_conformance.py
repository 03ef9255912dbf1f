"""Ray Tune's searcher conformance checks, applied to every raytuner searcher and the GPTuneBand scheduler.

Ray checks its own searchers (``ray/tune/tests/test_searchers.py``) for: ``save``/``restore``
mid-run, NaN and infinite results, ``points_to_evaluate``, a ``ConcurrencyLimiter`` around the
searcher, ``max_concurrent_trials``, ``num_samples=-1`` ended by the searcher, ``tune.with_resources``,
errors in the trainable with ``FailureConfig(max_failures=...)`` and ``RunConfig(storage_path=...)``.
The first group here drives each searcher as Ray does, without a cluster (fast); the second runs a real
local Ray ``Tuner`` per searcher, beside Ray's ``OptunaSearch`` given the same settings.
``points_to_evaluate`` is checked as Ray checks it: the given configurations come first, in order,
then the searcher's own; here also that a restored searcher gives none twice, that a bad point is
refused before anything is stored, and that a ``Tuner`` run's first trials equal those of ``OptunaSearch``.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from record_helpers import known

ray = pytest.importorskip("ray")
from ray import tune  # noqa: E402
from ray.tune.search import ConcurrencyLimiter, Searcher  # noqa: E402
from ray.tune.search.optuna import OptunaSearch  # noqa: E402
from ray_helpers import each_result, interrupted_then_restored  # noqa: E402
from raytuner.schedulers import GPTuneBandOptions, GPTuneBandScheduler  # noqa: E402
from raytuner.searchers import (  # noqa: E402
    DiscreteBOSearcher,
    EngineSearcher,
    LCMSearcher,
    RandomSearcher,
    TLA2Searcher,
    TransferLearningSearcher,
)
from record_helpers import provenance  # noqa: E402

from raytuner.engines.bandit import BanditStructure  # noqa: E402
from raytuner.errors import InvalidInputError  # noqa: E402
from raytuner.models import LCMOptions  # noqa: E402
from raytuner.models.executors import InlineExecutor  # noqa: E402
from raytuner.problem.records import FunctionEvaluation  # noqa: E402
from raytuner.problem.space import ProblemSpace  # noqa: E402
from raytuner.store import JsonStore  # noqa: E402
from raytuner.test_problems import DEMO_PROBLEM, demo, demo_fidelity  # noqa: E402

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
DISCRETE = ProblemSpace.parse(
    {
        "parameter_space": [{"name": "x", "type": "integer", "lower_bound": 0, "upper_bound": 40}],
        "output_space": [{"name": "y"}],
    }
)
FAST = LCMOptions(n_starts=1, max_iterations=60, warm_iterations=20)
SOURCE = [
    FunctionEvaluation.create({"t": t}, {"x": x / 8}, {"y": demo(x / 8, t)}) for t in (0.6, 0.8) for x in range(8)
]

pytestmark = pytest.mark.slow


def _random(store: Path, **session: Any) -> EngineSearcher:
    return RandomSearcher(PROBLEM, [{"t": 1.0}], store, "p", seed=0, **session)


def _lcm(store: Path, **session: Any) -> EngineSearcher:
    options = {"n_initial": 3, "lcm": FAST}
    return LCMSearcher(
        PROBLEM, [{"t": 1.0}], store, "p", seed=0, engine_options=options, executor=InlineExecutor(), **session
    )


def _tl(store: Path, **session: Any) -> EngineSearcher:
    options = {"lcm": FAST}
    return TransferLearningSearcher(
        PROBLEM, {"t": 1.0}, SOURCE, store, "p", seed=0, engine_options=options, executor=InlineExecutor(), **session
    )


def _tla2(store: Path, **session: Any) -> EngineSearcher:
    return TLA2Searcher(PROBLEM, {"t": 1.0}, SOURCE, store, "p", seed=0, executor=InlineExecutor(), **session)


def _discrete(store: Path, **session: Any) -> EngineSearcher:
    return DiscreteBOSearcher(DISCRETE, None, store, "p", seed=0, engine_options={"n_initial": 3}, **session)


SEARCHERS: dict[str, Callable[..., EngineSearcher]] = {
    "random": _random,
    "lcm": _lcm,
    "tl": _tl,
    "tla2": _tla2,
    "discrete": _discrete,
}


def value(config: dict[str, Any]) -> float:
    """The objective of either problem: the demo function, or a parabola over the integer ``x``."""
    if "t" in config:
        return demo(config["x"], config["t"])
    return (config["x"] - 17) ** 2 / 100


@pytest.fixture(params=sorted(SEARCHERS))
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., EngineSearcher]:
    """A function that builds the parametrised searcher on one store in ``tmp_path``."""
    return lambda **session: SEARCHERS[request.param](tmp_path / "store", **session)


def statuses(searcher: Any) -> list[str]:
    return [r.status for r in searcher.session.store.evaluations("p")]


# --- driven as Ray drives a searcher, without a cluster -----------------------------------------------------------


def test_save_and_restore_mid_run_continue_without_loss(make: Callable[..., EngineSearcher], tmp_path: Path) -> None:
    searcher = make()
    configs = {f"t{n}": searcher.suggest(f"t{n}") for n in range(3)}
    searcher.on_trial_complete("t0", {"y": value(configs["t0"])})
    searcher.save(str(tmp_path / "state"))

    restored = make()
    restored.restore(str(tmp_path / "state"))
    assert set(restored.session.pending) == {"t1", "t2"}  # the trials in flight are adopted, not dropped
    for trial in ("t1", "t2"):
        restored.on_trial_complete(trial, {"y": value(configs[trial])})
    more = restored.suggest("t3")
    assert isinstance(more, dict) and more not in configs.values()
    restored.on_trial_complete("t3", {"y": value(more)})
    assert statuses(restored) == ["ok"] * 4


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "fast"])
def test_nan_infinite_and_non_numeric_results_are_failed_records_and_the_search_goes_on(
    make: Callable[..., EngineSearcher], bad: Any, caplog: pytest.LogCaptureFixture
) -> None:
    searcher = make()
    config = searcher.suggest("bad")
    with caplog.at_level(logging.WARNING):
        searcher.on_trial_complete("bad", {"y": bad})
    (record,) = searcher.session.store.evaluations("p")
    assert record.status == "failed" and record.value("y") is None
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "bad" in warned[0] and "'y'" in warned[0] and repr(bad) in warned[0]
    for n in range(3):  # the searcher keeps suggesting
        config = searcher.suggest(f"ok{n}")
        assert isinstance(config, dict)
        searcher.on_trial_complete(f"ok{n}", {"y": value(config)})
    assert statuses(searcher) == ["failed", "ok", "ok", "ok"]


def test_a_spent_budget_finishes_the_search_with_a_summary(
    make: Callable[..., EngineSearcher], caplog: pytest.LogCaptureFixture
) -> None:
    searcher = make(max_evaluations=2)
    configs = {f"t{n}": searcher.suggest(f"t{n}") for n in range(2)}
    assert searcher.suggest("t2") is None  # the budget is held by trials in flight: Ray asks again later
    searcher.on_trial_complete("t0", {"y": value(configs["t0"])})
    searcher.on_trial_complete("t1", {"y": math.nan})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="raytuner"):
        assert searcher.suggest("t2") == Searcher.FINISHED  # num_samples=-1 ends here
    assert [r.getMessage() for r in caplog.records] == ["search of p finished: 2 evaluations, 1 failed"]


def points_for(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """Two points of the parametrised searcher's problem (no task key: they run on its one task)."""
    return [{"x": 29}, {"x": 3}] if request.node.callspec.params["make"] == "discrete" else [{"x": 0.75}, {"x": 0.25}]


def test_points_to_evaluate_come_first_in_order_and_a_restore_gives_none_twice(
    make: Callable[..., EngineSearcher], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    points = points_for(request)
    searcher = make(points_to_evaluate=points)
    configs = {f"t{n}": searcher.suggest(f"t{n}") for n in range(2)}
    assert [{"x": c["x"]} for c in configs.values()] == points
    assert all(c.get("t", 1.0) == 1.0 for c in configs.values())
    searcher.on_trial_complete("t0", {"y": value(configs["t0"])})
    searcher.save(str(tmp_path / "state"))

    restored = make(points_to_evaluate=points)
    restored.restore(str(tmp_path / "state"))
    assert restored.points_left == [] and set(restored.session.pending) == {"t1"}
    own = restored.suggest("t2")  # the engine's own, not a given point again
    assert isinstance(own, dict) and {"x": own["x"]} not in points
    for trial in ("t1", "t2"):
        restored.on_trial_complete(trial, {"y": value(configs.get(trial, own))})
    records = restored.session.store.evaluations("p")
    assert [r.raytuner.proposer for r in records][:2] == ["given", "given"]
    assert records[2].raytuner.proposer != "given" and statuses(restored) == ["ok"] * 3


def test_a_bad_point_is_refused_in_one_line_before_anything_is_stored(
    make: Callable[..., EngineSearcher], tmp_path: Path
) -> None:
    with pytest.raises(InvalidInputError, match=r"points_to_evaluate\[1\]\.x") as bad:
        make(points_to_evaluate=[{"x": 0}, {"x": "large"}])
    assert "\n" not in str(bad.value) and not (tmp_path / "store").exists()


# --- a real local Ray Tuner ----------------------------------------------------------------------------------------


def conformance_trainable(config: dict[str, Any], calls: str) -> None:
    """The objective; the run's first call raises (Ray retries it), its third reports NaN (a failed record).

    The calls are counted in files, so exactly one trial is retried and one is failed whatever the order.
    """
    n = 0
    while True:
        try:
            os.close(os.open(Path(calls) / str(n), os.O_CREAT | os.O_EXCL))
            break
        except FileExistsError:
            n += 1
    if n == 0:
        raise RuntimeError("transient failure: retried by FailureConfig")
    tune.report({"y": math.nan if n == 2 else value(config)})


def tuner_run(
    search_alg: Searcher, tmp_path: Path, samples: int, param_space: dict | None = None, num_samples: int | None = None
) -> tune.ResultGrid:
    """A Tuner with every Ray setting a searcher must live with: limiter, resources, failures, storage.

    ``samples`` trials are expected; ``num_samples`` is Ray's setting (default: ``samples``; ``-1``: until the
    searcher says it is finished).
    """
    calls = tmp_path / "calls"
    calls.mkdir(parents=True)
    trainable = tune.with_parameters(conformance_trainable, calls=str(calls))
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space=param_space,
        tune_config=tune.TuneConfig(
            search_alg=ConcurrencyLimiter(search_alg, max_concurrent=2),
            metric="y",
            mode="min",
            num_samples=samples if num_samples is None else num_samples,
            max_concurrent_trials=2,
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "ray"), verbose=0, failure_config=tune.FailureConfig(max_failures=1)
        ),
    )
    results = tuner.fit()
    assert len(list(calls.iterdir())) == samples + 1  # each trial ran once, and the failed one once more
    assert list((tmp_path / "ray").iterdir())  # the experiment is kept where storage_path says
    return results


@pytest.fixture(scope="module")
def optuna_peer(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], tune.ResultGrid]:
    """Ray's ``OptunaSearch`` run once under :func:`tuner_run` (the first test to ask runs it): the reference."""
    runs: dict[int, tune.ResultGrid] = {}

    def run(samples: int) -> tune.ResultGrid:
        if samples not in runs:
            space = {"t": 1.0, "x": tune.uniform(0, 1)}
            runs[samples] = tuner_run(OptunaSearch(seed=0), tmp_path_factory.mktemp("optuna"), samples, space)
        return runs[samples]

    return run


def test_a_tuner_run_with_a_limiter_resources_retries_and_nan_matches_optuna(
    local_ray: Any,
    make: Callable[..., EngineSearcher],
    optuna_peer: Callable[[int], tune.ResultGrid],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    samples = 5
    searcher = make(max_evaluations=samples)  # the searcher's budget ends the run: num_samples=-1
    with caplog.at_level(logging.WARNING, logger="raytuner"):
        results = tuner_run(searcher, tmp_path / "raytuner", samples, num_samples=-1)
    records = searcher.session.store.evaluations("p")
    assert len(results) == len(records) == samples and not results.errors  # the retried trial succeeded
    (failed,) = [r for r in records if r.status == "failed"]
    (nan,) = [r for r in each_result(results) if math.isnan(known(r.metrics)["y"])]
    assert provenance(failed).trial_id == known(nan.metrics)["trial_id"]
    assert [r.getMessage() for r in caplog.records if r.name.startswith("raytuner")] == [
        f"trial {known(nan.metrics)['trial_id']} failed: {provenance(failed).failure_message} (reported 'y'=nan)",
        f"search of p finished: {samples} evaluations, 1 failed",  # the run's summary, as the budget ends it
    ]
    best = results.get_best_result()  # Ray skips the NaN trial, as raytuner's record says
    assert known(best.metrics)["y"] == min(r.known_value("y") for r in records if r.status == "ok")

    peer = optuna_peer(samples)
    assert len(peer) == len(results) and len(peer.errors) == len(results.errors)
    assert sum(math.isnan(known(r.metrics)["y"]) for r in each_result(peer)) == 1


def band_trainable(config: dict[str, Any], calls: str) -> None:
    """The GPTuneBand demo's one-shot objective at the trial's fidelity; the run's second call reports NaN."""
    n = len(list(Path(calls).iterdir()))
    (Path(calls) / str(n)).touch()  # trials of this run report one at a time (max_concurrent_trials=1)
    y = demo_fidelity(config["x"], config["t"], b=config["fidelity"], b_max=2)
    tune.report({"y": math.nan if n == 1 else y})


def test_the_scheduler_under_a_tuner_ends_the_run_and_warns_of_a_nan_trial(
    local_ray: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler = GPTuneBandScheduler(
        PROBLEM,
        [{"t": 1.0}],
        JsonStore(tmp_path / "store"),
        "band",
        seed=0,
        structure=BanditStructure.hyperband(1, 2, 2),
        options=GPTuneBandOptions(lcm=FAST, executor=InlineExecutor()),
    )
    (tmp_path / "calls").mkdir()
    trainable = tune.with_parameters(band_trainable, calls=str(tmp_path / "calls"))
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        tune_config=tune.TuneConfig(
            search_alg=scheduler.searcher(),
            scheduler=scheduler,
            num_samples=-1,  # the scheduler's plan ends the run
            max_concurrent_trials=1,
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "ray"), verbose=0),
    )
    with caplog.at_level(logging.WARNING, logger="raytuner"):
        results = tuner.fit()
    records = JsonStore(tmp_path / "store").evaluations("band")
    assert scheduler.engine.finished and not results.errors and len(results) == len(records)
    (failed,) = [r for r in records if r.status == "failed"]
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("raytuner")]
    assert warned == [
        f"trial {provenance(failed).trial_id} failed: {provenance(failed).failure_message} (reported 'y'=nan)",
        f"search of band finished: {len(records)} evaluations, 1 failed",  # the run's summary
    ]


def slowish(config: dict[str, Any]) -> None:
    time.sleep(0.2)  # so that a trial is in flight at the interrupt
    tune.report({"y": value(config)})


@pytest.mark.parametrize("name", ["random", "tla2", "discrete"])  # LCM and TLA1: their own modules' tests
def test_tuner_restore_of_an_interrupted_run_continues_without_loss(local_ray: Any, name: str, tmp_path: Path) -> None:
    searcher = SEARCHERS[name](tmp_path / "store")
    _, records, _ = interrupted_then_restored(searcher, slowish, searcher.session.store, "p", 6, tmp_path)
    assert len({(tuple(r.task_parameter.values()), tuple(r.tuning_parameter.values())) for r in records}) == 6


def test_a_tuner_runs_points_to_evaluate_first_as_optuna_does(local_ray: Any, tmp_path: Path) -> None:
    space = {"t": 1.0, "x": tune.uniform(0, 1)}
    points = [{"x": 0.75}, {"x": 0.25}]  # Optuna refuses a constant in a point; raytuner takes it with its value
    raytuner_searcher = RandomSearcher.from_param_space(
        store=tmp_path / "store", problem_name="p", seed=0, points_to_evaluate=[{"t": 1.0, **p} for p in points]
    )
    firsts = []
    for name, searcher in [
        ("raytuner", raytuner_searcher),
        ("optuna", OptunaSearch(points_to_evaluate=points, seed=0)),
    ]:
        tuner = tune.Tuner(
            slowish,
            param_space=space,
            tune_config=tune.TuneConfig(
                search_alg=ConcurrencyLimiter(searcher, max_concurrent=1),
                metric="y",
                mode="min",
                num_samples=3,
                reuse_actors=True,  # one actor start per run, not one per trial
            ),
            run_config=tune.RunConfig(storage_path=str(tmp_path / name), verbose=0),
        )
        results = sorted(
            each_result(tuner.fit()), key=lambda r: int(Path(r.path).name.split("_")[2])
        )  # Ray's trial counter
        assert len(results) == 3 and all(r.error is None for r in results)
        assert all(known(r.config)["t"] == 1.0 for r in results)
        firsts.append([{"x": known(r.config)["x"]} for r in results[:2]])
    assert firsts == [points, points]
    records = raytuner_searcher.session.store.evaluations("p")
    assert [r.raytuner.proposer for r in records].count("given") == 2 and len(records) == 3
