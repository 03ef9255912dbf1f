"""The GPTuneBand scheduler and its searcher on a real local Ray: tune.run, Tuner, pauses, failures, restore."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")
from dashboard_helpers import BAND_PROBLEM, BandRun  # noqa: E402
from model_helpers import FAST  # noqa: E402
from ray import tune  # noqa: E402
from ray_helpers import InterruptOnce, StallGuard  # noqa: E402
from raytuner.schedulers import GPTuneBandOptions, GPTuneBandScheduler  # noqa: E402
from record_helpers import known, provenance  # noqa: E402

from raytuner.engines.bandit import BanditStructure  # noqa: E402
from raytuner.errors import InvalidInputError  # noqa: E402
from raytuner.models.executors import InlineExecutor  # noqa: E402
from raytuner.problem.space import ProblemSpace  # noqa: E402
from raytuner.store import JsonStore  # noqa: E402
from raytuner.test_problems import DEMO_PROBLEM, demo_fidelity  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ProblemSpace.parse(DEMO_PROBLEM)
TASKS = [{"t": 1.0}, {"t": 1.3}]
B_MAX = 4

pytestmark = pytest.mark.slow


def one_shot(config: dict) -> None:
    tune.report({"y": demo_fidelity(config["x"], config["t"], b=config["fidelity"], b_max=B_MAX)})


def diverges(x: float) -> bool:
    # a narrow band inside the space: each failed trial costs a new actor (about 3 s), and a failure region at
    # the edge drew the model's samples to x = 0 (4 failures of 26 with x < 0.15). Seed 0's initial design of
    # bracket 1 has x = 0.030 in the band, so some trial fails whatever order Ray finishes trials in.
    return 0.02 < x < 0.05


def sometimes_diverges(config: dict) -> None:
    if diverges(config["x"]):
        raise RuntimeError("solver diverged")
    one_shot(config)


def training(config: dict) -> None:
    """An iterative trainable that checkpoints its epoch and reports where it started."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d:
            start = json.loads((Path(d) / "state.json").read_text())["epoch"]
    for epoch in range(start + 1, 10 * B_MAX):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "state.json").write_text(json.dumps({"epoch": epoch}))
            y = demo_fidelity(config["x"], config["t"], b=min(epoch, B_MAX), b_max=B_MAX)
            tune.report({"y": y, "started_at": start}, checkpoint=tune.Checkpoint.from_directory(d))


class SlowPause(tune.Trainable):
    """An iterative trainable whose checkpoint takes half a second to save, so every pause is in flight a while.

    Ray pauses a trial only once its checkpoint is saved: while it saves, the other trial's results can
    complete the rung and retire the pausing trial.
    """

    def setup(self, config: dict) -> None:
        self.epoch = 0

    def step(self) -> dict:
        self.epoch += 1
        return {"y": demo_fidelity(self.config["x"], self.config["t"], b=min(self.epoch, B_MAX), b_max=B_MAX)}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        time.sleep(0.5)
        (Path(checkpoint_dir) / "state.json").write_text(json.dumps({"epoch": self.epoch}))

    # Ray passes the directory save_checkpoint wrote to (its own docs' example does so); its stub says dict
    def load_checkpoint(self, checkpoint_dir: str) -> None:  # type: ignore[override]
        self.epoch = json.loads((Path(checkpoint_dir) / "state.json").read_text())["epoch"]

    def reset_config(self, new_config: dict) -> bool:
        self.epoch = 0
        return True


def band(tmp_path: Path, **options: Any) -> GPTuneBandScheduler:
    """The scheduler under test: ``options`` are :class:`GPTuneBandOptions` fields over the fast defaults here."""
    return GPTuneBandScheduler(
        PROBLEM,
        TASKS,
        JsonStore(tmp_path / "store"),
        "band",
        seed=0,
        structure=BanditStructure.hyperband(1, B_MAX, 2),
        options=GPTuneBandOptions(**{"lcm": FAST, "executor": InlineExecutor(), **options}),
    )


def planned(scheduler: GPTuneBandScheduler) -> Counter:
    structure = scheduler.engine.structure
    return Counter(
        {
            (s, rung): n * len(TASKS)
            for s in range(structure.s_max + 1)
            for rung, (n, _) in enumerate(structure.rungs(s))
        }
    )


@pytest.mark.parametrize("model", ["paper", "levels"])
def test_tune_run_one_shot_records_the_whole_plan(local_ray: Any, tmp_path: Path, model: str) -> None:
    scheduler = band(tmp_path, model=model, search_candidates=256)
    assert scheduler.engine.model == model
    analysis = tune.run(
        one_shot,
        search_alg=scheduler.searcher(),
        scheduler=scheduler,
        num_samples=-1,
        max_concurrent_trials=2,
        reuse_actors=True,
        verbose=0,
        storage_path=str(tmp_path / "ray"),
    )
    records = JsonStore(tmp_path / "store").evaluations("band")
    assert len(analysis.trials) == len(records) and scheduler.engine.finished
    assert Counter((provenance(r).bracket, provenance(r).rung) for r in records) == planned(scheduler)
    assert all(r.status == "ok" and known(provenance(r).cost) == known(provenance(r).fidelity) / B_MAX for r in records)
    best = scheduler.best_per_task()
    assert all(b is not None and b.raytuner.fidelity == B_MAX for b in best)
    assert JsonStore(tmp_path / "store").models("band")  # the LCM fits are stored too


@pytest.mark.parametrize("trainable", [training, SlowPause], ids=["function", "slow_checkpoint"])
def test_tuner_iterative_pauses_and_continues_promoted_trials(
    local_ray: Any, tmp_path: Path, trainable: Callable[[dict], None] | type[tune.Trainable]
) -> None:
    """Iterative fidelity under Tuner: promotions continue their trials from checkpoints, and the run ends.

    With a slow checkpoint (``SlowPause``) a trial the engine retired while its pause was in flight used to
    stay PAUSED for ever. It is a race: it hung 5 runs of 5 on an idle machine, none of 1 under heavy load,
    and a CI run once with the instant checkpoint. ``StallGuard`` turns such a hang into a failure.
    """
    scheduler = band(tmp_path, fidelity_mode="iterative")
    guard = StallGuard(scheduler)
    # reuse_actors: a fresh actor per trial cost about a second each (20 s of the test's 21 on 2 idle cores)
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=scheduler.searcher(),
            scheduler=scheduler,
            num_samples=-1,
            max_concurrent_trials=2,
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "ray"), verbose=0, stop=guard),
    )
    results = tuner.fit()
    records = JsonStore(tmp_path / "store").evaluations("band")
    assert not guard.stalled, "the run did not end: a trial stayed PAUSED after the engine finished"
    assert not results.errors and scheduler.engine.finished
    assert Counter((provenance(r).bracket, provenance(r).rung) for r in records) == planned(scheduler)
    by_uid = {r.uid: r for r in records}
    promotions = [r for r in records if provenance(r).parent]
    assert promotions
    for r in promotions:  # a promotion continues its parent's Ray trial from the checkpoint
        parent = by_uid[known(provenance(r).parent)]
        assert known(provenance(r).trial_id).split("@")[0] == known(provenance(parent).trial_id).split("@")[0]
        assert r.additional_output["training_iteration"] == provenance(r).fidelity
        assert known(provenance(r).cost) == pytest.approx(
            (known(provenance(r).fidelity) - known(provenance(parent).fidelity)) / B_MAX
        )
    expected = scheduler.engine.structure.cost_per_pass("iterative")
    assert scheduler.engine.cost_per_task() == pytest.approx([expected] * len(TASKS))
    assert len(results) == sum(1 for r in records if provenance(r).rung == 0)  # one Ray trial per sample


def test_failed_trials_are_failed_evaluations_and_never_promoted(local_ray: Any, tmp_path: Path) -> None:
    scheduler = band(tmp_path)
    tune.run(
        sometimes_diverges,
        search_alg=scheduler.searcher(),
        scheduler=scheduler,
        num_samples=-1,
        max_concurrent_trials=2,
        reuse_actors=True,
        verbose=0,
        storage_path=str(tmp_path / "ray"),
        raise_on_failed_trial=False,
    )
    records = JsonStore(tmp_path / "store").evaluations("band")
    failed = [r for r in records if r.status != "ok"]
    assert failed and all(diverges(r.tuning_parameter["x"]) for r in failed)
    assert not any(diverges(r.tuning_parameter["x"]) for r in records if r.status == "ok")
    assert all("error" in (provenance(r).failure_message or "") for r in failed)
    assert not {provenance(r).parent for r in records} & {r.uid for r in failed}
    assert scheduler.engine.finished


def test_an_unknown_model_is_refused_naming_the_field_before_anything_is_stored(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"^model: .*\(allowed: paper, levels\)$"):
        band(tmp_path, model="fancy")
    assert JsonStore(tmp_path / "store").problems() == []


def test_a_foreign_search_alg_is_refused(local_ray: Any, tmp_path: Path) -> None:
    scheduler = band(tmp_path)
    with pytest.raises(Exception, match="search_alg=band.searcher"):
        tune.run(
            one_shot,
            config={"x": tune.uniform(0, 1), "t": 1.0, "fidelity": 4.0},
            scheduler=scheduler,
            num_samples=1,
            verbose=0,
            storage_path=str(tmp_path / "ray"),
        )


@pytest.mark.skipif(
    os.environ.get("TUNE_DISABLE_SIGINT_HANDLER", "0") != "0", reason="the interrupt relies on Tune's SIGINT handler"
)
def test_tuner_restore_resumes_in_the_middle_of_a_bracket(local_ray: Any, tmp_path: Path) -> None:
    scheduler = band(tmp_path)
    # reuse_actors: a fresh actor per trial cost about a second each (see above)
    tuner = tune.Tuner(
        one_shot,
        tune_config=tune.TuneConfig(
            search_alg=scheduler.searcher(),
            scheduler=scheduler,
            num_samples=-1,
            max_concurrent_trials=2,
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(
            name="exp",
            storage_path=str(tmp_path / "ray"),
            verbose=0,
            callbacks=[InterruptOnce(14, tmp_path / "interrupted")],
        ),
    )
    tuner.fit()
    before = JsonStore(tmp_path / "store").evaluations("band")
    assert (tmp_path / "interrupted").exists() and 14 <= len(before) < sum(planned(scheduler).values())
    tune.Tuner.restore(str(tmp_path / "ray" / "exp"), trainable=one_shot).fit()
    records = JsonStore(tmp_path / "store").evaluations("band")
    assert Counter((provenance(r).bracket, provenance(r).rung) for r in records) == planned(scheduler)
    assert {r.uid for r in before} <= {r.uid for r in records}


def test_band_demo_main_job_runs_locally_and_prints_the_best_per_task(band_run: BandRun) -> None:
    # the main job's example as a user runs it (a subprocess on its own local Ray): the run the dashboard
    # tests read too (conftest's band_run: tasks t = 1 and 1.3, b_min 3, one pass), made once per test run
    plan = BanditStructure.hyperband(3, 27, 3)
    per_task = sum(n for s in range(plan.s_max + 1) for n, _ in plan.rungs(s))
    with JsonStore(band_run.store) as store:
        records = store.evaluations(BAND_PROBLEM)
    assert len(records) == 2 * per_task == 40
    assert (
        f"{BAND_PROBLEM}: {len(records)} evaluations; GPTuneBand pass 1/1, done, 0 in flight, 2 of 2 tasks finished"
    ) in band_run.output
    rows = [line.split() for line in band_run.output.splitlines() if line.split()[:1] in (["1"], ["1.3"])]
    assert [row[:2] for row in rows] == [["1", str(per_task)], ["1.3", str(per_task)]]
    assert all(float(row[-1]) >= 1.0 - 1e-9 for row in rows)  # ratio to the grid optimum, its lower bound
    assert band_run.output.count(", done, ") == 1  # the end, said once
    # it ends saying where the results are and how to look at them
    where, show, dashboard = band_run.output.splitlines()[-3:]
    assert where == f"Every evaluation is in {band_run.store / BAND_PROBLEM}.json; to look at them:"
    assert show.split()[:5] == ["raytuner", "history", "show", str(band_run.store), "--problem"]
    assert show.split()[5] == BAND_PROBLEM and dashboard.split()[:3] == ["raytuner", "dashboard", str(band_run.store)]


def test_band_demo_interrupted_says_so_and_how_to_continue(tmp_path: Path) -> None:
    # Ctrl-C printed the finished run's table and Ray's "Resume experiment with: Tuner.restore(...)", which
    # does not continue the run (the store does)
    store = tmp_path / "store"
    args = ["--store", str(store), "--tasks", "1.0", "--b-min", "3", "--passes", "5", "--cpus", "1"]
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "examples/band_demo.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        for line in known(proc.stdout):  # the first line of the plan's progress: Ray Tune runs the trials
            if "; GPTuneBand pass 1/5, " in line:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-3000:]
    interrupted = next(line for line in out.splitlines() if line.startswith("Interrupted after "))
    evaluations = int(interrupted.split()[2])
    assert interrupted == (
        f"Interrupted after {evaluations} evaluations, every one kept in {store / BAND_PROBLEM}.json; "
        "the same command again continues where it stopped."
    )
    with JsonStore(store) as kept:
        assert len(kept.evaluations(BAND_PROBLEM)) == evaluations > 0
    assert "Best configuration" not in out and "Tuner.restore" not in out + err
