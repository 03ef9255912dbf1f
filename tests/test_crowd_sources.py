"""Tuning that starts from the crowd's data (issue 23): MLA and GPTuneBand learn from source tasks; the download.

The engines are driven inline on the demo function; the download runs against a real crowd
server on a real mongod (the ``crowd`` fixture), with real users and access levels.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from record_helpers import known, provenance

from raytuner.client.channel import ServiceError
from raytuner.client.crowd import CrowdClient, sync_store_for
from raytuner.client.crowd_sources import crowd_source
from raytuner.client.remote import RemoteTuner
from raytuner.crowd.cache import DOWNLOADS, crowd_cache_name
from raytuner.crowd.sync import CrowdSyncStore
from raytuner.engines import MLA, EngineSpec, GPTuneBand, build_engine, fresh_engine
from raytuner.engines.multiobjective import MultiObjectiveMLA, mla_engine
from raytuner.engines.transfer import FIRST, TLA1Engine, TransferLearning
from raytuner.errors import InvalidInputError
from raytuner.models import LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.meta import MetaDescription
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.sampling import sample_configurations
from raytuner.problem.space import ProblemSpace
from raytuner.session.tuning_session import TuningSession
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo, demo_fidelity

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
FAST = LCMOptions(n_starts=2, max_iterations=60)


def tuned(t: float, n: int, seed: int = 0) -> list[FunctionEvaluation]:
    """``n`` evaluations of demo task ``t`` (a Latin hypercube): what another user tuned and shared."""
    return [
        FunctionEvaluation.create({"t": t}, c, {"y": demo(c["x"], t)})
        for c in sample_configurations(PROBLEM, {"t": t}, n, seed=seed)
    ]


def mla(**kwargs: Any) -> MLA:
    return MLA(
        PROBLEM,
        [{"t": 1.0}],
        seed=0,
        n_initial=3,
        lcm=FAST,
        executor=InlineExecutor(),
        search_candidates=256,
        **kwargs,
    )


def drive(engine: Any, steps: int, b_max: float | None = None) -> list[FunctionEvaluation]:
    told = []
    for _ in range(steps):
        s = engine.ask()
        y = (
            demo(s.config["x"], s.task["t"])
            if b_max is None
            else demo_fidelity(s.config["x"], s.task["t"], b=s.fidelity, b_max=b_max)
        )
        told.append(engine.tell(s, {"y": y}))
    return told


def test_mla_takes_source_tasks_into_its_model_and_tunes_its_own_tasks_only() -> None:
    source = tuned(2.0, 8) + tuned(3.0, 8, seed=1) + tuned(1.0, 1, seed=2)  # one of them of the target task
    engine = mla(source=source)
    assert engine.tasks == [{"t": 1.0}, {"t": 2.0}, {"t": 3.0}] and engine.spec_tasks == [{"t": 1.0}]
    assert [len(e) for e in engine.evaluated] == [1, 8, 8]
    told = drive(engine, 4)
    assert {r.task_parameter["t"] for r in told} == {1.0}
    with pytest.raises(InvalidInputError, match="^task: .* is a source task of this engine"):
        engine.ask({"t": 2.0})
    with pytest.raises(InvalidInputError, match="^task: "):
        engine.tell(FunctionEvaluation.create({"t": 3.0}, {"x": 0.5}, {"y": 1.0}))
    assert [provenance(r).proposer for r in told] == ["initial", "initial", "model", "model"]  # 3 - 1 initial points
    fitted = engine.fitted_model()
    assert fitted is not None and fitted.hyperparameters.shape[1] == 3  # three tasks in the LCM
    again = fresh_engine(engine)  # rebuilt by its spec, with the same sources
    assert again.tasks == engine.tasks and [r.tuning_parameter for r in drive(again, 4)] == [
        r.tuning_parameter for r in told
    ]
    built = build_engine(
        EngineSpec("mla", {"n_initial": 3, "lcm": FAST, "search_candidates": 256}),
        PROBLEM,
        [{"t": 1.0}],
        0,
        executor=InlineExecutor(),
        source=source,
    )
    assert built.tasks == engine.tasks


def test_a_task_without_data_starts_where_the_source_tasks_agree() -> None:
    """Its first point is TransferLearning's with no target data (WeightedSum(equal)); the LHS follows."""
    source = tuned(2.0, 8) + tuned(3.0, 8, seed=1)
    engine = mla(source=source)
    told = drive(engine, 4)
    assert [provenance(r).proposer for r in told] == ["source_start", "initial", "initial", "model"]
    consensus = TransferLearning(PROBLEM, {"t": 1.0}, source, FIRST, 0, lcm=FAST, executor=InlineExecutor())
    assert told[0].tuning_parameter == consensus.ask().config
    assert [r.tuning_parameter for r in drive(fresh_engine(engine), 4)] == [r.tuning_parameter for r in told]
    assert mla().ask().provenance.proposer == "initial"  # no sources: a plain LHS
    two = ProblemSpace.parse({**DEMO_PROBLEM, "output_space": [{"name": "y"}, {"name": "z"}]})
    other = MLA(
        two, [{"t": 1.0}], 0, n_initial=2, lcm=FAST, executor=InlineExecutor(), objective="z", source=source
    )  # the sources have no value of the output tuned
    assert other.ask().provenance.proposer == "initial"


def test_sources_of_the_target_task_are_its_data() -> None:
    """Shared evaluations of the very task: no initial design, and none of them is proposed again."""
    engine = mla(source=tuned(1.0, 30, seed=3))
    assert engine.tasks == [{"t": 1.0}] and len(engine.evaluated[0]) == 30
    assert engine.ask().provenance.proposer == "model"


class CountingSource:
    """An EvaluationSource that counts how often it is read."""

    def __init__(self, records: list[FunctionEvaluation]) -> None:
        self.records, self.reads = records, 0

    def evaluations(self) -> list[FunctionEvaluation]:
        self.reads += 1
        return list(self.records)


def test_several_objectives_read_the_source_once_and_model_the_same_tasks() -> None:
    problem = ProblemSpace.parse({**DEMO_PROBLEM, "output_space": [{"name": "y"}, {"name": "z"}]})
    records = [
        r.model_copy(update={"evaluation_result": {"y": r.evaluation_result["y"], "z": 1 - r.tuning_parameter["x"]}})
        for r in tuned(2.0, 6)
    ]
    source = CountingSource(records)
    engine = mla_engine(
        problem,
        [{"t": 1.0}],
        0,
        n_initial=2,
        lcm=FAST,
        executor=InlineExecutor(),
        search_candidates=128,
        source=source,
    )
    assert isinstance(engine, MultiObjectiveMLA)
    assert source.reads == 1 and len(engine.components) == 2
    assert all(c.tasks == engine.tasks == [{"t": 1.0}, {"t": 2.0}] for c in engine.components)
    for _ in range(3):
        s = engine.ask()
        assert s.provenance.proposer != "source_start"  # one objective's consensus would ignore the other
        engine.tell(s, {"y": demo(s.config["x"], 1.0), "z": 1 - s.config["x"]})
    assert source.reads == 1


def test_a_source_that_is_no_records_is_refused_naming_the_field() -> None:
    for bad in ("history/", 5, [{"t": 1.0}]):
        with pytest.raises(InvalidInputError, match="^source: "):
            mla(source=bad)


def test_the_first_model_of_a_later_pass_sees_every_earlier_record() -> None:
    """GPTuneBand's sampler of pass 2 (or one with sources) fits to all the data it was built with."""
    engine = band(passes=2, source=tuned(2.0, 5))
    while engine.current_pass == 0:
        drive(engine, 1, b_max=8.0)
    drive(engine, 1, b_max=8.0)
    sampler = engine._sampler
    assert sampler is not None and sampler.pass_index == 1
    assert sampler.fit_horizon() >= len(sampler._records) - 1  # all but the newest record, told just now


def band(tasks: list[dict[str, float]] | None = None, **kwargs: Any) -> GPTuneBand:
    options = {
        "seed": 0,
        "b_min": 1,
        "b_max": 8,
        "eta": 2,
        "lcm": FAST,
        "executor": InlineExecutor(),
        "search_candidates": 256,
        **kwargs,
    }
    return GPTuneBand(PROBLEM, tasks or [{"t": 1.15}], **options)


def test_gptuneband_resumes_a_crowd_sourced_run_mid_bracket(tmp_path: Path) -> None:
    other = band([{"t": 1.0}, {"t": 1.3}], seed=5)  # another user's GPTuneBand run, at every fidelity
    shared = []
    while not other.finished:
        shared += drive(other, 1, b_max=8.0)
    engine = band(source=shared)
    assert len(engine.level_problem.input_space.names) == 2
    session = TuningSession(PROBLEM, engine, JsonStore(tmp_path), "band")
    twin = band(source=shared)
    steps = 0
    while True:  # stop after a promotion, mid-bracket
        trial = session.ask()
        its = twin.ask()
        assert (its.config, its.provenance.bracket, its.provenance.rung) == (
            trial.config,
            trial.provenance.bracket,
            trial.provenance.rung,
        )
        session.tell(trial, {"y": demo_fidelity(trial.config["x"], 1.15, b=known(trial.fidelity), b_max=8.0)})
        twin.tell(session.records[-1])
        steps += 1
        if trial.provenance.rung == 1:
            break
    resumed = TuningSession.resume(PROBLEM, band(source=shared), JsonStore(tmp_path), "band")
    assert len(resumed.records) == steps
    for _ in range(4):
        a, b = resumed.ask(), twin.ask()
        assert (a.config, a.provenance.bracket, a.provenance.rung) == (
            b.config,
            b.provenance.bracket,
            b.provenance.rung,
        )
        resumed.tell(a, {"y": demo_fidelity(a.config["x"], 1.15, b=known(a.fidelity), b_max=8.0)})
        twin.tell(resumed.records[-1])


@pytest.mark.parametrize("model", ["paper", "levels"])
def test_a_gptuneband_run_resumed_before_a_new_pass_starts_its_samplers_as_the_live_one_does(
    tmp_path: Path, model: str
) -> None:
    """A new pass's samplers warm-start from the stored models of the earlier pass, as the live run's did.

    The source records are the same ones (uids included) each time, as the local cache of the crowd's gives them.
    """
    shared = tuned(2.0, 6)

    def make() -> GPTuneBand:
        return band(source=shared, n_initial=1, passes=2, model=model)

    def run(engine: Any, session: Any, steps: int) -> None:
        for _ in range(steps):
            a, b = session.ask(), engine.ask()
            assert (a.config, a.provenance.pass_, a.provenance.bracket) == (
                b.config,
                b.provenance.pass_,
                b.provenance.bracket,
            )
            session.tell(a, {"y": demo_fidelity(a.config["x"], 1.15, b=a.fidelity, b_max=8.0)})
            engine.tell(session.records[-1])

    first = make()
    while first.current_pass == 0:
        drive(first, 1, b_max=8.0)
    twin = make()
    live = TuningSession(PROBLEM, make(), JsonStore(tmp_path), "band")
    run(twin, live, len(first._records) - 2)  # two samples before pass 2 starts
    resumed = TuningSession.resume(PROBLEM, make(), JsonStore(tmp_path), "band")
    run(twin, resumed, 8)
    assert {provenance(r).pass_ for r in resumed.records[-6:]} == {2}


def test_gptuneband_lifts_sources_to_the_level_of_their_fidelity() -> None:
    at = {8.0: tuned(2.0, 3), 4.0: tuned(2.0, 3, seed=1), 3.0: tuned(2.0, 3, seed=2)}
    records = [
        r.model_copy(update={"raytuner": provenance(r).model_copy(update={"fidelity": b})})
        for b, group in at.items()
        for r in group
    ] + tuned(3.0, 2, seed=4)  # no fidelity: b_max
    engine = band(source=records)
    failed = FunctionEvaluation.create({"t": 5.0}, {"x": 0.5}, failure="crashed", outputs=["y"])
    engine = band(source=records + [failed])
    levels = sorted({(r.task_parameter["t"], r.task_parameter["gptuneband_level"]) for r in engine._sources})
    assert levels == [(2.0, 0), (2.0, 1), (3.0, 0)]  # 3 is no bracket's fidelity, 5 failed: left out
    assert all(r.raytuner is None for r in engine._sources)
    drive(engine, 3, b_max=8.0)
    assert engine._sampler is not None and {"t": 2.0, "gptuneband_level": 1} in engine._sampler.tasks


def test_gptuneband_with_sources_alternates_between_the_lcm_with_them_and_the_one_without() -> None:
    """Sources that mislead cannot hold a search: every other model-chosen sample of a bracket is the plain LCM's."""
    engine = band(source=tuned(2.0, 6), n_initial=1)
    told: list[FunctionEvaluation] = []
    while len([r for r in told if provenance(r).rung == 0]) < 16:
        told += drive(engine, 1, b_max=8.0)
    for j in range(4):  # the k-th sample of bracket j: the initial one, then in turn
        how = [provenance(r).proposer for r in told if (provenance(r).rung, provenance(r).bracket) == (0, j)]
        first = "source_start" if j == 0 else "initial"  # the sources are at b_max, bracket 0's fidelity
        assert len(how) >= 3 and how == [first, "plain_model", "model", "plain_model", "model"][: len(how)], how
    sampler, plain = engine._sampler, engine._plain
    assert sampler is not None and plain is not None
    assert {"t": 2.0, "gptuneband_level": 0} in sampler.tasks and all(t["t"] == 1.15 for t in plain.tasks)
    assert [len(e) for e in plain.evaluated] == [len(e) for e in sampler.evaluated[: len(plain.tasks)]]
    assert plain.sampler() == {**sampler.sampler(), "plain": True}  # their models are stored apart
    every = band(source=tuned(2.0, 6), n_initial=1, source_proposals="every")
    assert {provenance(r).proposer for r in drive(every, 8, b_max=8.0)} <= {
        "source_start",
        "initial",
        "model",
        "promotion",
    }
    assert every._plain is None and band(n_initial=1)._plain is None  # no sources: one LCM
    with pytest.raises(InvalidInputError, match="^source_proposals: unknown choice 'some'.*alternate, every"):
        band(source=tuned(2.0, 6), source_proposals="some")


def test_gptuneband_resumes_a_run_whose_sources_are_its_own_task_with_the_plain_lcms_own_models(tmp_path: Path) -> None:
    """With sources of the very task, both LCMs have the same tasks: each warm-starts from its own stored models."""
    shared = tuned(1.15, 6, seed=7)
    session = TuningSession(PROBLEM, band(source=shared, n_initial=1), JsonStore(tmp_path), "band")
    twin = band(source=shared, n_initial=1)
    for _ in range(9):
        trial, other = session.ask(), twin.ask()
        assert (trial.config, trial.provenance.proposer) == (other.config, other.provenance.proposer)
        session.tell(trial, {"y": demo_fidelity(trial.config["x"], 1.15, b=known(trial.fidelity), b_max=8.0)})
        twin.tell(session.records[-1])
    resumed = TuningSession.resume(PROBLEM, band(source=shared, n_initial=1), JsonStore(tmp_path), "band")
    sources = []
    for _ in range(6):
        a, b = resumed.ask(), twin.ask()
        assert (a.config, a.provenance.bracket, a.provenance.rung) == (
            b.config,
            b.provenance.bracket,
            b.provenance.rung,
        )
        sources.append(a.provenance.proposer)
        resumed.tell(a, {"y": demo_fidelity(a.config["x"], 1.15, b=known(a.fidelity), b_max=8.0)})
        twin.tell(resumed.records[-1])
    assert "plain_model" in sources


# -- the download, from a real crowd repository ---------------------------------------------------------------


def meta(key: str) -> MetaDescription:
    return MetaDescription.parse({"tuning_problem_name": "demo", "problem_space": DEMO_PROBLEM, "api_key": key})


@pytest.fixture
def shared_crowd(crowd: tuple[Any, Any, str]) -> tuple[str, dict[str, str], list[FunctionEvaluation]]:
    """alice shares tasks 2 and 3 publicly and task 4 privately; bob is registered."""
    server, repository, _ = crowd
    keys = {}
    for user in ("alice", "bob"):
        repository.add_user(user, f"{user}@example.org")
        keys[user] = repository.create_key(user)
    public = tuned(2.0, 5) + tuned(3.0, 5, seed=1)
    with CrowdClient(server.address, keys["alice"]) as client:
        client.upload("demo", public, access="public")
        client.upload("demo", tuned(4.0, 5, seed=2), access="private")
    return server.address, keys, public


def test_download_once_into_a_cache_of_its_own_within_the_access_levels(
    shared_crowd: tuple[str, dict[str, str], list[FunctionEvaluation]],
    tmp_path: Path,
    reserved_port: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    address, keys, public = shared_crowd
    store = JsonStore(tmp_path / "history")
    store.append("demo", public[0])  # bob's own store holds one of them already
    source = crowd_source(meta(keys["bob"]), store, server=address)
    assert source is not None and source.problem_name == crowd_cache_name("demo") == "demo.crowd"
    got = source.evaluations()
    assert {r.uid for r in got} == {r.uid for r in public[1:]}  # alice's private task 4 never comes
    assert [r.uid for r in store.evaluations("demo")] == [public[0].uid]  # the run's own records untouched
    caplog.set_level(logging.INFO, logger="raytuner.client.crowd_sources")
    down = f"127.0.0.1:{reserved_port}"  # nothing listens there
    again = crowd_source(meta(keys["bob"]), tmp_path / "history", server=down, timeout=0.5, retries=0)
    assert again is not None and [r.uid for r in again.evaluations()] == [r.uid for r in got]
    assert "cached in the store" in caplog.text and "could not be reached" not in caplog.text
    engine = mla(source=again)  # the engine learns from them
    assert engine.tasks == [{"t": 1.0}, {"t": 2.0}, {"t": 3.0}]


def test_a_crowd_outage_at_start_up_tunes_without_sources(
    tmp_path: Path, reserved_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="raytuner.client.crowd_sources")
    down = f"127.0.0.1:{reserved_port}"
    key = "rt_" + "0" * 16 + "_" + "A" * 43
    source = crowd_source(meta(key), tmp_path / "history", server=down, timeout=0.5, retries=0)
    assert source is None and "tuning starts without crowd sources" in caplog.text
    told = drive(mla(source=source), 4)
    assert len(told) == 4 and np.isfinite([r.evaluation_result["y"] for r in told]).all()
    assert JsonStore(tmp_path / "history").problems() == []  # nothing cached, nothing written


def test_a_synced_run_learns_from_the_crowd_and_sends_back_only_its_own(
    shared_crowd: tuple[str, dict[str, str], list[FunctionEvaluation]], tmp_path: Path
) -> None:
    """bob's synced run: the cache bypasses the sync, his evaluations go up, his source-fitted models stay local."""
    address, keys, public = shared_crowd
    synced = MetaDescription.parse(
        {"tuning_problem_name": "demo", "problem_space": DEMO_PROBLEM, "api_key": keys["bob"], "sync_crowd_repo": "yes"}
    )
    store = sync_store_for(synced, tmp_path / "history", server=address)
    assert isinstance(store, CrowdSyncStore)
    source = crowd_source(synced, store, server=address)
    assert source is not None and len(source.evaluations()) == len(public)
    session = TuningSession.resume(PROBLEM, mla(source=source), store, "demo")
    for _ in range(5):
        trial = session.ask()
        session.tell(trial, {"y": demo(trial.config["x"], 1.0)})
    assert store.unsent == 0 and JsonStore(tmp_path / "history").models("demo")  # models were fitted
    with CrowdClient(address, keys["bob"]) as client:
        up = client.query_function_evaluations("demo")
        assert {r.uid for r in up} == {r.uid for r in public} | {r.uid for r in session.records}
        assert client.query_surrogate_models("demo") == []  # each was fitted to alice's records too


def test_the_download_is_noted_even_when_nothing_matched_and_refresh_downloads_again(
    shared_crowd: tuple[str, dict[str, str], list[FunctionEvaluation]],
    tmp_path: Path,
    reserved_port: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    address, keys, public = shared_crowd
    narrow = MetaDescription.parse(
        {
            "tuning_problem_name": "demo",
            "api_key": keys["bob"],
            "problem_space": {
                **DEMO_PROBLEM,
                "input_space": [{"name": "t", "type": "real", "lower_bound": 8, "upper_bound": 9}],
            },
        }
    )
    assert crowd_source(narrow, tmp_path / "h", server=address) is None  # nothing of tasks 8..9
    down = f"127.0.0.1:{reserved_port}"
    caplog.set_level(logging.INFO, logger="raytuner.client.crowd_sources")
    assert crowd_source(narrow, tmp_path / "h", server=down, timeout=0.5, retries=0) is None  # noted: not asked
    assert "downloaded before" in caplog.text and "could not be reached" not in caplog.text
    assert len(list(JsonStore(tmp_path / "h").ledger().read("crowd_downloads"))) == 1
    with CrowdClient(address, keys["alice"]) as client:
        client.upload("demo", tuned(8.5, 3, seed=9), access="public")
    again = crowd_source(narrow, tmp_path / "h", server=address, refresh=True)
    assert again is not None and len(again.evaluations()) == 3


def test_a_refused_download_is_an_error_not_an_outage(crowd: tuple[Any, Any, str], tmp_path: Path) -> None:
    wrong = "rt_" + "0" * 16 + "_" + "A" * 43
    with pytest.raises(ServiceError) as info:
        crowd_source(meta(wrong), tmp_path / "h", server=crowd[0].address, retries=0)
    assert info.value.code == "UNAUTHENTICATED"


def test_a_service_session_of_mla_takes_a_source_problem(crowd: tuple[Any, Any, str]) -> None:
    server = crowd[0]
    meta_plain = MetaDescription.parse({"tuning_problem_name": "demo", "problem_space": DEMO_PROBLEM})
    with RemoteTuner(server.address, server.keys.create("carol"), timeout=30) as tuner:
        assert tuner.upload_evaluations("demo-tuned", tuned(2.0, 6)) == 6  # carol's own source problem
        tuner.create_session(
            meta_plain, "mla", tasks=[{"t": 1.0}], seed=0, options={"n_initial": 2, "source_problem": "demo-tuned"}
        )
        assert tuner.run(lambda config, task, fidelity: {"y": demo(config["x"], 1.0)}, max_trials=3) == 3
        engine = next(iter(server.manager._sessions.values())).tuning.engine
        assert engine.tasks == [{"t": 1.0}, {"t": 2.0}]
        bad: dict[str, Any]
        for bad in ({"source_problem": "demo"}, {"source_problem": 3}, {"source_query": {}}):
            with pytest.raises(ServiceError) as info:
                tuner.create_session(meta_plain, "mla", tasks=[{"t": 1.0}], options=bad)
            assert info.value.code == "INVALID_ARGUMENT" and "options.source_problem" in info.value.message


def test_a_service_session_downloads_the_crowd_sources_its_user_may_see_once(
    shared_crowd: tuple[str, dict[str, str], list[FunctionEvaluation]], crowd: tuple[Any, Any, str]
) -> None:
    address, keys, public = shared_crowd
    server = crowd[0]
    plain = MetaDescription.parse({"tuning_problem_name": "demo", "problem_space": DEMO_PROBLEM})
    with RemoteTuner(address, keys["bob"], timeout=30) as tuner:  # bob signs in with his crowd key
        with pytest.raises(ServiceError) as info:  # refused: nothing downloaded into the store
            tuner.create_session(plain, "mla", tasks=[{"t": 1.0}], options={"crowd_sources": True, "n_initail": 2})
        assert info.value.code == "INVALID_ARGUMENT" and "n_initail" in info.value.message
        assert server.store.evaluations("demo.crowd.bob") == [] and not list(server.store.ledger().read(DOWNLOADS))
        tuner.create_session(plain, "mla", tasks=[{"t": 1.0}], seed=0, options={"crowd_sources": True, "n_initial": 2})
        assert tuner.run(lambda config, task, fidelity: {"y": demo(config["x"], 1.0)}, max_trials=3) == 3
        engine = server.manager._sessions[tuner.session_id].tuning.engine
        assert engine.tasks == [{"t": 1.0}, {"t": 2.0}, {"t": 3.0}]  # alice's private task 4: never
        assert {r.uid for r in server.store.evaluations("demo.crowd.bob")} == {r.uid for r in public}
        with CrowdClient(address, keys["alice"]) as client:
            client.upload("demo", tuned(5.0, 2, seed=7), access="public")
        second = tuner.create_session(plain, "mla", tasks=[{"t": 1.5}], options={"crowd_sources": True})
        assert server.manager._sessions[second].spec.options["source_problem"] == "demo.crowd.bob"
        assert len(server.store.evaluations("demo.crowd.bob")) == len(public)  # downloaded once
        for bad, engine, field in (
            ({"crowd_sources": True}, "random", "options.crowd_sources"),
            ({"crowd_sources": "yes"}, "mla", "options.crowd_sources"),
            ({"crowd_sources": True, "source_problem": "x"}, "mla", "options.crowd_sources"),
            ({"source_problem": "demo.crowd.alice"}, "mla", "options.source_problem"),
        ):
            with pytest.raises(ServiceError) as info:  # the last: alice's cache, other access levels
                tuner.create_session(plain, engine, tasks=[{"t": 1.0}], options=bad)
            assert info.value.code == "INVALID_ARGUMENT" and info.value.message.startswith(field)


def test_a_tla1_prediction_that_breaks_a_constraint_gives_way_to_the_nearest_valid_point(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bounded = ProblemSpace.parse({**DEMO_PROBLEM, "constraints": {"small": "x <= 0.3"}})
    tuned = [
        FunctionEvaluation.create({"t": t}, {"x": x / 100}, {"y": (x / 100 - 0.1 * t) ** 2})
        for t in (1.0, 2.0, 3.0)
        for x in range(0, 31, 5)
    ]  # optima at x = 0.1 t: 0.3 at t = 3
    engine = TLA1Engine(bounded, [{"t": 7.0}], 0, tuned)
    assert engine.prediction.config["x"] > 0.5  # the trend, past the bound
    x = engine.ask().config["x"]
    assert 0.29 <= x <= 0.3 and "breaks a constraint" in caplog.text  # 2048 valid points: one lies this close


def test_gptuneband_starts_each_lcm_task_with_the_fewest_samples_of_a_bracket_or_half_with_sources() -> None:
    def band(**kwargs: Any) -> GPTuneBand:
        return GPTuneBand(
            PROBLEM, [{"t": 1.0}], 0, b_min=1, b_max=16, eta=2, lcm=FAST, executor=InlineExecutor(), **kwargs
        )

    plain = band()
    assert [plain.structure.samples(s) for s in range(5)] == [5, 4, 4, 8, 16]
    assert plain.n_initial == 4  # min N(s), as GPTune's MB_LCM (NS1)
    assert band(source=tuned(2.0, 8, seed=1)).n_initial == 2  # the crowd's records stand in for half
    assert band(source=[]).n_initial == 4  # a crowd that gave nothing: as without
    assert band(n_initial=3).n_initial == 3
    # the spec keeps the number chosen: a rebuilt engine starts the same way whatever its source gives later
    sourced = band(source=tuned(2.0, 8, seed=1))
    again = fresh_engine(sourced)
    assert isinstance(again, GPTuneBand) and sourced.spec.options["n_initial"] == 2 and again.n_initial == 2
