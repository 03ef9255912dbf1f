"""TransferLearningSearcher and TLA2Searcher (transfer learning to a target task) on a real local Ray.

tune.run, Tuner with failures, save/restore, a source read from a history store."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest
from record_helpers import known

ray = pytest.importorskip("ray")
from ray import tune  # noqa: E402
from ray_helpers import interrupted_then_restored, tuner_with_failures  # noqa: E402
from raytuner.searchers import TLA2Searcher, TransferLearningSearcher  # noqa: E402
from record_helpers import provenance  # noqa: E402

from raytuner.engines.transfer import DEFAULT_POOL, SourceData  # noqa: E402
from raytuner.models import LCMOptions  # noqa: E402
from raytuner.models.executors import InlineExecutor  # noqa: E402
from raytuner.problem.records import FunctionEvaluation  # noqa: E402
from raytuner.problem.space import ProblemSpace  # noqa: E402
from raytuner.store import JsonStore, StoreSource  # noqa: E402
from raytuner.test_problems import DEMO_PROBLEM, demo  # noqa: E402

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
SOURCE_T, TARGET = 0.8, {"t": 1.0}
FAST = LCMOptions(n_starts=2, max_iterations=200, warm_iterations=50)
FIRST = "weighted_sum_equal"  # the proposer while the target has no data

pytestmark = pytest.mark.slow


def source_records(n: int = 40, seed: int = 0) -> list[FunctionEvaluation]:
    rng = random.Random(seed)
    return [
        FunctionEvaluation.create({"t": SOURCE_T}, {"x": x}, {"y": demo(x, SOURCE_T)})
        for x in (rng.random() for _ in range(n))
    ]


@pytest.fixture(scope="module")
def source() -> SourceData:
    """One SourceData for the module: its source surrogates are fitted once and shared by the searchers.

    Fitted inline: the default executor would depend on whether a Ray happens to be running when the
    fixture is made (a test order dependence), and the small fits gain nothing from one.
    """
    return SourceData(PROBLEM, source_records(), lcm=FAST, executor=InlineExecutor())


# Trainables stay in the test module: Ray workers import them from here by value, and a shared helper
# module (tests/ray_helpers.py) is not importable in the workers (tried: ModuleNotFoundError).
def objective(config: dict) -> None:
    tune.report({"y": demo(config["x"], config["t"])})


def diverges(x: float) -> bool:
    # the first suggestions explore the source data's widest gap (0.101 to 0.251) from x = 0.189, which
    # succeeds, and step left into the failing region, which a model that leaves failures out cannot see.
    # Ray decides the order in which the two trials in flight finish: the searcher driven without Ray
    # through all 128 orders of the first seven completions met 3 to 5 failures of 8 in each, so the
    # test's "some failed" and its best result hold
    return x < 0.187 or x > 0.6


def sometimes_fails(config: dict) -> None:
    if diverges(config["x"]):
        raise RuntimeError("solver diverged")
    tune.report({"y": demo(config["x"], config["t"])})


def slowish(config: dict) -> None:
    time.sleep(0.2)  # so that a trial is in flight at the interrupt
    tune.report({"y": demo(config["x"], config["t"])})


def xs(records: list[FunctionEvaluation]) -> list[float]:
    return [r.tuning_parameter["x"] for r in records]


def test_tune_run_persists_every_trial_with_its_proposer(local_ray: Any, tmp_path: Path, source: SourceData) -> None:
    store = JsonStore(tmp_path / "store")
    searcher = TransferLearningSearcher(
        PROBLEM, TARGET, source, store, "demo-target", seed=0, engine_options={"algorithm": "ensemble", "lcm": FAST}
    )
    tune.run(
        objective,
        search_alg=searcher,
        num_samples=8,
        max_concurrent_trials=2,
        reuse_actors=True,
        storage_path=str(tmp_path / "ray"),
        verbose=0,
    )

    records = store.evaluations("demo-target")
    assert len(records) == 8 and all(r.status == "ok" for r in records)
    assert all(r.task_parameter == TARGET for r in records)
    assert len(set(xs(records))) == 8  # no configuration suggested twice
    for r in records:
        assert r.value("y") == pytest.approx(demo(r.tuning_parameter["x"], TARGET["t"]))
        assert r.modeling in {*DEFAULT_POOL, FIRST}, r.modeling
        assert (
            provenance(r).engine == r.modeling
            and (provenance(r).model_extra or {}).get("tla") == "ensemble"
            and provenance(r).trial_id
        )
    assert records[0].modeling == FIRST  # asked before any result: no target data
    assert searcher.engine.proposers == [r.modeling for r in records]
    assert searcher.session.records == records and not searcher.session.pending
    assert store.problems() == ["demo-target"]  # the source is read, never written


def test_tuner_records_failures_and_never_resuggests_them(local_ray: Any, tmp_path: Path, source: SourceData) -> None:
    store = JsonStore(tmp_path / "store")
    searcher = TransferLearningSearcher(
        PROBLEM, TARGET, source, store, "demo-target", seed=1, engine_options={"lcm": FAST}
    )
    results, records = tuner_with_failures(searcher, sometimes_fails, store, "demo-target", 8, tmp_path, diverges)
    assert len(set(xs(records))) == 8  # a failed config is never suggested again
    assert all(r.modeling in {*DEFAULT_POOL, FIRST} for r in records)
    assert len(results.errors) == sum(r.status == "failed" for r in records)
    assert known(results.get_best_result().metrics)["y"] == min(r.known_value("y") for r in records if r.status == "ok")


def test_restore_adopts_the_trials_in_flight(tmp_path: Path, source: SourceData) -> None:
    # no Ray needed: the searcher's methods are called as Ray Tune would call them
    store = JsonStore(tmp_path / "store")

    def searcher() -> TransferLearningSearcher:
        return TransferLearningSearcher(
            PROBLEM,
            TARGET,
            source,
            store,
            "demo-target",
            seed=5,
            executor=InlineExecutor(),
            engine_options={"lcm": FAST},
        )

    first = searcher()
    warm = first.suggest("warm")
    first.on_trial_complete("warm", {"y": demo(warm["x"], warm["t"])})
    a, b = first.suggest("a"), first.suggest("b")
    assert a != b
    first.on_trial_complete("a", {"y": demo(a["x"], a["t"])})
    checkpoint = tmp_path / "searcher.json"
    first.save(str(checkpoint))
    assert len(store.evaluations("demo-target")) == 2

    restored = searcher()
    restored.restore(str(checkpoint))
    assert set(restored.session.pending) == {"b"}
    assert restored.session.session_id == first.session.session_id
    assert restored.engine is not first.engine
    assert restored.engine.proposers == [r.modeling for r in store.evaluations("demo-target")]
    c = restored.suggest("c")
    assert c["x"] not in (a["x"], b["x"])  # b is in flight: not suggested again
    restored.on_trial_complete("b", {"y": demo(b["x"], b["t"])})
    restored.on_trial_complete("c", {"y": demo(c["x"], c["t"])})
    records = store.evaluations("demo-target")
    assert len(records) == 4 and len(set(xs(records))) == 4
    adopted = records[2]
    assert adopted.tuning_parameter == {"x": b["x"]} and adopted.status == "ok"
    assert provenance(adopted).trial_id == "b" and adopted.modeling in {*DEFAULT_POOL, FIRST}
    assert restored.engine.proposers == [r.modeling for r in records]


@pytest.mark.skipif(
    os.environ.get("TUNE_DISABLE_SIGINT_HANDLER", "0") != "0", reason="the interrupt relies on Tune's SIGINT handler"
)
def test_tuner_restore_continues_the_run_and_records_the_trials_in_flight(
    local_ray: Any, tmp_path: Path, source: SourceData
) -> None:
    store = JsonStore(tmp_path / "store")
    searcher = TransferLearningSearcher(
        PROBLEM, TARGET, source, store, "demo-target", seed=2, engine_options={"lcm": FAST}
    )
    restored, records, _ = interrupted_then_restored(searcher, slowish, store, "demo-target", 7, tmp_path)
    assert len(set(xs(records))) == 7
    assert all(r.modeling in {*DEFAULT_POOL, FIRST} for r in records)
    assert records[0].modeling == FIRST  # asked before any result: no target data
    restored_searcher = known(restored._local_tuner)._tune_config.search_alg  # the object Tune restored and ran
    assert isinstance(restored_searcher, TransferLearningSearcher)
    assert restored_searcher.engine.proposers == [r.modeling for r in records]


def test_a_source_read_from_a_history_store(local_ray: Any, tmp_path: Path) -> None:
    store = JsonStore(tmp_path / "store")
    assert store.append_many("demo-source", source_records(seed=7)) == 40
    searcher = TransferLearningSearcher(
        PROBLEM,
        TARGET,
        StoreSource(store, "demo-source"),
        store,
        "demo-target",
        seed=3,
        engine_options={"algorithm": "ensemble", "lcm": FAST},
    )
    tune.run(
        objective,
        search_alg=searcher,
        num_samples=4,
        max_concurrent_trials=2,
        reuse_actors=True,
        storage_path=str(tmp_path / "ray"),
        verbose=0,
    )

    records = store.evaluations("demo-target")
    assert len(records) == 4 and all(r.status == "ok" and r.task_parameter == TARGET for r in records)
    assert all(r.modeling in {*DEFAULT_POOL, FIRST} for r in records)
    assert records[0].modeling == FIRST  # asked before any result: no target data
    assert len(store.evaluations("demo-source")) == 40  # the source is untouched
    assert sorted(store.problems()) == ["demo-source", "demo-target"]


def test_tla2_tunes_a_new_task_from_tuned_ones_under_tune_run(local_ray: Any, tmp_path: Path) -> None:
    store = JsonStore(tmp_path / "store")
    tuned = [
        FunctionEvaluation.create({"t": t}, {"x": x / 19}, {"y": demo(x / 19, t)})
        for t in (0.8, 1.6)
        for x in range(20)
    ]
    store.append_many("demo-tuned", tuned)
    searcher = TLA2Searcher(
        PROBLEM,
        TARGET,
        StoreSource(store, "demo-tuned"),
        store,
        "demo-new",
        seed=3,
        engine_options={"n_initial": 2, "lcm": FAST},
    )
    prediction = searcher.engine.tla1.predict(TARGET).config["x"]
    tune.run(
        objective,
        search_alg=searcher,
        num_samples=4,
        max_concurrent_trials=2,
        reuse_actors=True,
        storage_path=str(tmp_path / "ray"),
        verbose=0,
    )
    records = store.evaluations("demo-new")
    assert len(records) == 4 and all(r.status == "ok" and r.task_parameter == TARGET for r in records)
    assert [provenance(r).proposer for r in records].count("initial") == 2  # around TLA1's prediction first
    assert len(store.evaluations("demo-tuned")) == 40 and 0 <= prediction <= 1
