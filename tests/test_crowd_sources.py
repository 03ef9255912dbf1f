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

from raytuner.client.crowd import CrowdClient
from raytuner.client.crowd_sources import crowd_cache_name, crowd_source
from raytuner.executors import InlineExecutor
from raytuner.meta import MetaDescription
from raytuner.models import LCMOptions
from raytuner.records import FunctionEvaluation
from raytuner.sampling import sample_configurations
from raytuner.session import TuningSession
from raytuner.space import ProblemSpace
from raytuner.store import JsonStore
from raytuner.strategies import MLA, EngineSpec, GPTuneBand, build_engine, fresh_engine
from raytuner.testing.functions import DEMO_PROBLEM, demo, demo_fidelity

PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
FAST = LCMOptions(n_starts=2, max_iterations=60)


def tuned(t: float, n: int, seed: int = 0) -> list[FunctionEvaluation]:
    """``n`` evaluations of demo task ``t`` (a Latin hypercube): what another user tuned and shared."""
    return [FunctionEvaluation.create({"t": t}, c, {"y": demo(c["x"], t)})
            for c in sample_configurations(PROBLEM, {"t": t}, n, seed=seed)]


def mla(**kwargs: Any) -> MLA:
    return MLA(PROBLEM, [{"t": 1.0}], seed=0, n_initial=3, options=FAST, executor=InlineExecutor(),
               search_candidates=256, **kwargs)


def drive(engine: Any, steps: int, b_max: float | None = None) -> list[FunctionEvaluation]:
    told = []
    for _ in range(steps):
        s = engine.ask()
        y = demo(s.config["x"], s.task["t"]) if b_max is None else demo_fidelity(s.config["x"], s.task["t"],
                                                                                  b=s.fidelity, b_max=b_max)
        told.append(engine.tell(s, {"y": y}))
    return told


def test_mla_takes_source_tasks_into_its_model_and_tunes_its_own_tasks_only() -> None:
    source = tuned(2.0, 8) + tuned(3.0, 8, seed=1) + tuned(1.0, 1, seed=2)     # one of them of the target task
    engine = mla(source=source)
    assert engine.tasks == [{"t": 1.0}, {"t": 2.0}, {"t": 3.0}] and engine.spec_tasks == [{"t": 1.0}]
    assert [len(e) for e in engine.evaluated] == [1, 8, 8]
    told = drive(engine, 4)
    assert {r.task_parameter["t"] for r in told} == {1.0}
    assert [r.raytuner.source for r in told] == ["initial", "initial", "model", "model"]   # 3 - 1 initial points
    fitted = engine.fitted_model()
    assert fitted is not None and fitted.hyperparameters.shape[1] == 3                 # three tasks in the LCM
    again = fresh_engine(engine)                              # rebuilt by its spec, with the same sources
    assert again.tasks == engine.tasks and [r.tuning_parameter for r in drive(again, 4)] == \
        [r.tuning_parameter for r in told]
    built = build_engine(EngineSpec("mla", {"n_initial": 3, "options": FAST, "search_candidates": 256}), PROBLEM,
                         [{"t": 1.0}], 0, executor=InlineExecutor(), source=source)
    assert built.tasks == engine.tasks


def test_sources_of_the_target_task_are_its_data() -> None:
    """Shared evaluations of the very task: no initial design, and none of them is proposed again."""
    shared = tuned(1.0, 30, seed=3)
    engine = mla(source=shared)
    suggestion = engine.ask()
    assert suggestion.provenance.source == "model" and engine.tasks == [{"t": 1.0}]
    assert suggestion.config not in [r.tuning_parameter for r in shared]


def band(tasks: list[dict[str, float]] | None = None, **kwargs: Any) -> GPTuneBand:
    options = {"seed": 0, "b_min": 1, "b_max": 8, "eta": 2, "options": FAST, "executor": InlineExecutor(),
               "search_candidates": 256, **kwargs}
    return GPTuneBand(PROBLEM, tasks or [{"t": 1.15}], **options)


def test_gptuneband_resumes_a_crowd_sourced_run_mid_bracket(tmp_path: Path) -> None:
    other = band([{"t": 1.0}, {"t": 1.3}], seed=5)      # another user's GPTuneBand run, at every fidelity
    shared = []
    while not other.finished:
        shared += drive(other, 1, b_max=8.0)
    engine = band(source=shared)
    assert len(engine.level_problem.input_space.names) == 2
    session = TuningSession("band", PROBLEM, engine, JsonStore(tmp_path))
    twin = band(source=shared)
    steps = 0
    while True:                                      # stop after a promotion, mid-bracket
        trial = session.ask()
        other = twin.ask()
        assert (other.config, other.provenance.bracket, other.provenance.rung) == \
            (trial.config, trial.provenance.bracket, trial.provenance.rung)
        session.tell(trial, {"y": demo_fidelity(trial.config["x"], 1.15, b=trial.fidelity, b_max=8.0)})
        twin.tell(session.records[-1])
        steps += 1
        if trial.provenance.rung == 1:
            break
    resumed = TuningSession.resume("band", PROBLEM, band(source=shared), JsonStore(tmp_path))
    assert len(resumed.records) == steps
    for _ in range(4):
        a, b = resumed.ask(), twin.ask()
        assert (a.config, a.provenance.bracket, a.provenance.rung) == (b.config, b.provenance.bracket,
                                                                        b.provenance.rung)
        resumed.tell(a, {"y": demo_fidelity(a.config["x"], 1.15, b=a.fidelity, b_max=8.0)})
        twin.tell(resumed.records[-1])


def test_gptuneband_lifts_sources_to_the_level_of_their_fidelity() -> None:
    at = {8.0: tuned(2.0, 3), 4.0: tuned(2.0, 3, seed=1), 3.0: tuned(2.0, 3, seed=2)}
    records = [r.model_copy(update={"raytuner": r.raytuner.model_copy(update={"fidelity": b})})
               for b, group in at.items() for r in group] + tuned(3.0, 2, seed=4)      # no fidelity: b_max
    engine = band(source=records)
    levels = sorted({(r.task_parameter["t"], r.task_parameter["gptuneband_level"])
                     for r in engine._sampler_options["source"]})
    assert levels == [(2.0, 0), (2.0, 1), (3.0, 0)]            # 3 is no bracket's fidelity: left out
    assert all(r.raytuner is None for r in engine._sampler_options["source"])
    drive(engine, 3, b_max=8.0)
    assert engine._sampler is not None and {"t": 2.0, "gptuneband_level": 1} in engine._sampler.tasks


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
        shared_crowd: tuple[str, dict[str, str], list[FunctionEvaluation]], tmp_path: Path,
        reserved_port: int, caplog: pytest.LogCaptureFixture) -> None:
    address, keys, public = shared_crowd
    store = JsonStore(tmp_path / "history")
    store.append("demo", public[0])                       # bob's own store holds one of them already
    source = crowd_source(meta(keys["bob"]), store, server=address)
    assert source is not None and source.problem_name == crowd_cache_name("demo") == "demo.crowd"
    got = source.evaluations()
    assert {r.uid for r in got} == {r.uid for r in public[1:]}          # alice's private task 4 never comes
    assert [r.uid for r in store.evaluations("demo")] == [public[0].uid]     # the run's own records untouched
    caplog.set_level(logging.INFO, logger="raytuner.client.crowd_sources")
    down = f"127.0.0.1:{reserved_port}"                                  # nothing listens there
    again = crowd_source(meta(keys["bob"]), tmp_path / "history", server=down, timeout=0.5, retries=0)
    assert again is not None and [r.uid for r in again.evaluations()] == [r.uid for r in got]
    assert "cached in the store" in caplog.text and "could not be reached" not in caplog.text
    engine = mla(source=again)                                          # the engine learns from them
    assert engine.tasks == [{"t": 1.0}, {"t": 2.0}, {"t": 3.0}]


def test_a_crowd_outage_at_start_up_tunes_without_sources(tmp_path: Path, reserved_port: int,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="raytuner.client.crowd_sources")
    down = f"127.0.0.1:{reserved_port}"
    key = "rt_" + "0" * 16 + "_" + "A" * 43
    source = crowd_source(meta(key), tmp_path / "history", server=down, timeout=0.5, retries=0)
    assert source is None and "tuning starts without crowd sources" in caplog.text
    told = drive(mla(source=source), 4)
    assert len(told) == 4 and np.isfinite([r.evaluation_result["y"] for r in told]).all()
    assert JsonStore(tmp_path / "history").problems() == []              # nothing cached, nothing written
