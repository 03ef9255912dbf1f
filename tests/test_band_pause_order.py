"""The GPTuneBand scheduler's iterative path driven through Ray Tune's callbacks in the order that hung, without Ray.

Ray pauses a trial only once its checkpoint is saved; until then the trial stays ``RUNNING`` and sends no
result. :class:`SlowSaves` plays Ray's controller with every checkpoint save slower than any training step,
so the other trials' results complete rungs (retiring or promoting the pausing trials) while their pauses are
in flight: the order in which a retired trial was left ``PAUSED`` for ever and the run never ended.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler
from ray.tune.search import Searcher
from raytuner.schedulers import GPTuneBandOptions, GPTuneBandScheduler
from record_helpers import provenance

from benchmarks.band_hang import B_MAX, FAST, planned
from raytuner.engines import BanditStructure
from raytuner.models.executors import InlineExecutor
from raytuner.problem.space import ProblemSpace
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo_fidelity

TASKS = [{"t": 1.0}, {"t": 1.3}]


@dataclass(eq=False)
class FakeTrial:
    """What the scheduler reads of a Ray trial, plus where its training is."""

    trial_id: str
    config: dict[str, Any]
    status: str = Trial.PENDING
    epoch: int = 0
    pausing: bool = False  # PAUSE decided, checkpoint save in flight
    last_result: dict[str, Any] = field(default_factory=dict)


class SlowSaves:
    """Ray's controller as the scheduler sees it, stepping deterministically with saves slower than training.

    Each step: ask the searcher for a trial when none is pending, start the trial the scheduler chooses
    while fewer than ``slots`` run, then one result of the first running trial that is not pausing. Pauses
    complete (``RUNNING`` to ``PAUSED``) only when no running trial can report. ``stop_trial`` calls the
    hooks Ray's does, in Ray's order.
    """

    def __init__(self, band: GPTuneBandScheduler, slots: int) -> None:
        self.band, self.searcher, self.slots = band, band.searcher(), slots
        self.trials: list[FakeTrial] = []
        self.search_finished = False

    def get_trials(self) -> list[FakeTrial]:
        return self.trials

    def stop_trial(self, trial: FakeTrial) -> None:
        if trial.status in (Trial.PENDING, Trial.PAUSED):
            self.band.on_trial_remove(self, trial)
            self.searcher.on_trial_complete(trial.trial_id)
        elif trial.status == Trial.RUNNING:
            self.band.on_trial_complete(self, trial, trial.last_result)
            self.searcher.on_trial_complete(trial.trial_id, result=trial.last_result)
        trial.status, trial.pausing = Trial.TERMINATED, False  # a save in flight is dropped

    def finished(self) -> bool:
        return self.search_finished and all(t.status == Trial.TERMINATED for t in self.trials)

    def step(self) -> None:
        if not self.search_finished and not any(t.status == Trial.PENDING for t in self.trials):
            tid = f"t{len(self.trials):03d}"
            config = self.searcher.suggest(tid)
            if config == Searcher.FINISHED:
                self.search_finished = True
            elif config is not None:
                self.trials.append(FakeTrial(tid, config))
        if sum(t.status == Trial.RUNNING for t in self.trials) < self.slots:
            chosen = self.band.choose_trial_to_run(self)
            if chosen is not None:
                chosen.status = Trial.RUNNING  # resumed from its checkpoint: its epoch is kept
        reporting = [t for t in self.trials if t.status == Trial.RUNNING and not t.pausing]
        if not reporting:
            for trial in self.trials:  # the slow saves resolve last
                if trial.pausing:
                    trial.status, trial.pausing = Trial.PAUSED, False
            return
        trial = reporting[0]
        trial.epoch += 1
        y = demo_fidelity(trial.config["x"], trial.config["t"], b=min(trial.epoch, B_MAX), b_max=B_MAX)
        trial.last_result = {"y": y, "training_iteration": trial.epoch}
        decision = self.band.on_trial_result(self, trial, trial.last_result)
        if decision == TrialScheduler.STOP:
            self.stop_trial(trial)
        elif decision == TrialScheduler.PAUSE:
            trial.pausing = True

    def waiting_retired(self) -> list[str]:
        """Trials paused or pausing whose evaluation the engine retired: they would wait for ever."""
        states = self.band._states
        return [
            t.trial_id
            for t in self.trials
            if t.status in (Trial.RUNNING, Trial.PAUSED)
            and (t.status == Trial.PAUSED or t.pausing)
            and states[t.trial_id].told
            and self.band.engine.retired(states[t.trial_id].uid)
        ]


@pytest.mark.parametrize("slots", [2, 3])
def test_a_trial_retired_while_its_pause_is_in_flight_is_stopped_at_once(tmp_path: Path, slots: int) -> None:
    band = GPTuneBandScheduler(
        ProblemSpace.parse(DEMO_PROBLEM),
        TASKS,
        JsonStore(tmp_path / "store"),
        "band",
        seed=0,
        structure=BanditStructure.hyperband(1, B_MAX, 2),
        options=GPTuneBandOptions(
            lcm=FAST, executor=InlineExecutor(), fidelity_mode="iterative", search_candidates=128
        ),
    )
    band.max_concurrent = slots
    ray = SlowSaves(band, slots)
    stopped_while_pausing = 0
    for _ in range(2000):
        if ray.finished():
            break
        pausing = {t.trial_id for t in ray.trials if t.pausing}
        ray.step()
        stopped_while_pausing += sum(t.status == Trial.TERMINATED for t in ray.trials if t.trial_id in pausing)
        # the moment the engine retires a waiting trial, it is stopped: never paused or pausing after a callback
        assert ray.waiting_retired() == []
    assert ray.finished(), [(t.trial_id, t.status, t.pausing) for t in ray.trials]
    assert stopped_while_pausing > 0  # the order that hung did happen
    records = JsonStore(tmp_path / "store").evaluations("band")
    assert Counter((provenance(r).bracket, provenance(r).rung) for r in records) == planned(band, len(TASKS))
    assert all(r.status == "ok" for r in records)
