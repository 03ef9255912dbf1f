"""Stress of GPTuneBand's iterative path on Ray Tune: many small runs, each must end (``python -m benchmarks band-hang``).

Each run tunes a tiny bandit structure (``b_min = 1``, ``b_max = 4``, ``η = 2``) under ``tune.Tuner`` with
:class:`~raytuner.schedulers.GPTuneBandScheduler` in ``fidelity_mode="iterative"``, 2 to 4 concurrent trials
and a checkpoint that takes a random 0 to 0.5 s to save, so that pauses are in flight while other trials'
results complete rungs, retire trials and route promotions. All runs share one local Ray (started here when
none is, with 2 CPUs). A run *hangs* when it has not ended a number of Ray loop steps after its engine
finished, or when it passes its wall-clock deadline (:class:`StallGuard` stops it either way, so the bench
itself always ends). A run *fails* when it ends without the whole plan recorded, or with errors.

``OUT/results.json`` keys: ``runs``, ``hangs``, ``failures``, ``seconds_median``, ``seconds_max``,
``concurrency`` (runs per ``max_concurrent_trials``), ``hung`` (for each hang: the run, its seed and the
trials' statuses when it was stopped). ``OUT/report.md`` says the same in words.

Example::

    python -m benchmarks band-hang --out bench_out/hang           # 200 runs
    python -m benchmarks band-hang --out bench_out/hang --quick   # 20 runs
"""

from __future__ import annotations

import json
import logging
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray import tune
from raytuner.schedulers import GPTuneBandOptions, GPTuneBandScheduler

from raytuner.engines import BanditStructure
from raytuner.models import LCMOptions
from raytuner.models.executors import InlineExecutor
from raytuner.problem.space import ProblemSpace
from raytuner.store import JsonStore
from raytuner.test_problems import DEMO_PROBLEM, demo_fidelity

__all__ = ["StallGuard", "SlowCheckpoint", "slow_training", "run_once", "run"]

log = logging.getLogger(__name__)

B_MAX = 4
FAST = LCMOptions(n_starts=1, warm_starts=1, max_iterations=60, warm_iterations=20, screen=2)


class StallGuard(tune.Stopper):
    """Ends a run that would never end, and says so: its engine finished yet Ray keeps stepping, or time is up.

    Ray asks ``stop_all`` once per step of its loop, so ``steps`` counts loop steps, not seconds: a finished
    run ends within a handful of steps that handle events, and a step with no event waits 0.1 s, so 1,000
    steps leave a pause still saving (or any last event) at least 100 s. ``deadline`` (seconds, ``None``: no
    limit) catches a run that stalls before its engine finishes. After a stop, ``stalled`` is true and
    ``snapshot`` holds the trials' statuses and what the scheduler knew of each.

    Args:
        scheduler: The run's :class:`~raytuner.schedulers.GPTuneBandScheduler`.
        steps: Loop steps allowed after the engine finished.
        deadline: Seconds allowed for the whole run.
    """

    def __init__(self, scheduler: GPTuneBandScheduler, steps: int = 1000, deadline: float | None = None) -> None:
        self.scheduler, self.steps, self.after, self.stalled = scheduler, steps, 0, False
        self.deadline = None if deadline is None else time.monotonic() + deadline
        self.snapshot: dict[str, Any] = {}
        self.trials: list[Any] = []

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        """Whether to stop the run (Ray asks once per loop step)."""
        self.after += self.scheduler.engine.finished
        late = self.deadline is not None and time.monotonic() > self.deadline
        if (self.after > self.steps or late) and not self.stalled:
            self.stalled = True
            self.snapshot = self._snapshot()
        return self.stalled

    def _snapshot(self) -> dict[str, Any]:
        band = self.scheduler
        return {
            "engine_finished": band.engine.finished,
            "progress": band.engine.progress(),
            "held": len(band._held),
            "states": {tid: vars(s) for tid, s in band._states.items()},
            "trials": {t.trial_id: t.status for t in self.trials},
        }

    def watch(self) -> tune.Callback:
        """A callback that lets the guard see Ray's trials (for :attr:`snapshot`); pass it in ``callbacks``."""
        guard = self

        class _Watch(tune.Callback):
            def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
                guard.trials = trials

        return _Watch()


class SlowCheckpoint(tune.Trainable):
    """An iterative trainable whose checkpoint takes a random time to save (``delay``: the most, in seconds).

    Ray pauses a trial only once its checkpoint is saved, so each pause stays in flight a random while.
    """

    def setup(self, config: dict, delay: float = 0.5) -> None:
        self.epoch, self.delay = 0, delay
        self.rng = random.Random(f"{config.get('x')}")

    def step(self) -> dict:
        self.epoch += 1
        return {"y": demo_fidelity(self.config["x"], self.config["t"], b=min(self.epoch, B_MAX), b_max=B_MAX)}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        time.sleep(self.rng.uniform(0.0, self.delay))
        (Path(checkpoint_dir) / "state.json").write_text(json.dumps({"epoch": self.epoch}))

    # Ray types the argument as save_checkpoint's dict, yet passes the directory when save_checkpoint returns None
    def load_checkpoint(self, checkpoint_dir: str) -> None:  # type: ignore[override]
        self.epoch = json.loads((Path(checkpoint_dir) / "state.json").read_text())["epoch"]

    def reset_config(self, new_config: dict) -> bool:
        self.epoch = 0
        return True


def slow_training(config: dict, delay: float = 0.5) -> None:
    """The function form of :class:`SlowCheckpoint`: each report's checkpoint takes a random 0 to ``delay`` s
    to write, and training resumes from the last one.

    Args:
        config: The trial's configuration (``x``, and GPTuneBand's fidelity).
        delay: The longest checkpoint write, in seconds.
    """
    start, rng = 0, random.Random(f"{config.get('x')}")
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as folder:
            start = json.loads((Path(folder) / "state.json").read_text())["epoch"]
    for epoch in range(start + 1, 4 * B_MAX):
        with tempfile.TemporaryDirectory() as folder:
            time.sleep(rng.uniform(0.0, delay))
            (Path(folder) / "state.json").write_text(json.dumps({"epoch": epoch}))
            y = demo_fidelity(config["x"], config["t"], b=min(epoch, B_MAX), b_max=B_MAX)
            tune.report({"y": y}, checkpoint=tune.Checkpoint.from_directory(folder))


TRAINABLES: dict[str, type[tune.Trainable] | Callable[..., Any]] = {"class": SlowCheckpoint, "function": slow_training}


def planned(scheduler: GPTuneBandScheduler, tasks: int) -> Counter:
    """The (bracket, rung) counts a whole pass records."""
    structure = scheduler.engine.structure
    return Counter(
        {(s, rung): n * tasks for s in range(structure.s_max + 1) for rung, (n, _) in enumerate(structure.rungs(s))}
    )


def run_once(
    seed: int,
    concurrency: int,
    tasks: int,
    folder: Path,
    trainable: str = "class",
    delay: float = 0.5,
    deadline: float = 120.0,
    steps: int = 1000,
) -> dict[str, Any]:
    """One iterative run on the current Ray; returns ``seconds``, ``hang``, ``failure`` (and ``snapshot``).

    Args:
        seed: The engine's seed.
        concurrency: ``max_concurrent_trials``.
        tasks: How many tasks (1 or 2).
        trainable: ``"class"`` (:class:`SlowCheckpoint`) or ``"function"`` (:func:`slow_training`).
        folder: Where the run's store and Ray results go.
        delay: The longest checkpoint save, in seconds.
        deadline: Seconds after which the run counts as hung.
        steps: Ray loop steps after the engine finished after which the run counts as hung.
    """
    problem = ProblemSpace.parse(DEMO_PROBLEM)
    task_list = [{"t": 1.0}, {"t": 1.3}][:tasks]
    band = GPTuneBandScheduler(
        problem,
        task_list,
        JsonStore(folder / "store"),
        "hang",
        seed=seed,
        structure=BanditStructure.hyperband(1, B_MAX, 2),
        options=GPTuneBandOptions(
            lcm=FAST, executor=InlineExecutor(), fidelity_mode="iterative", search_candidates=128
        ),
    )
    guard = StallGuard(band, steps=steps, deadline=deadline)
    tuner = tune.Tuner(
        tune.with_parameters(TRAINABLES[trainable], delay=delay),
        tune_config=tune.TuneConfig(
            search_alg=band.searcher(),
            scheduler=band,
            num_samples=-1,
            max_concurrent_trials=concurrency,
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(storage_path=str(folder / "ray"), verbose=0, stop=guard, callbacks=[guard.watch()]),
    )
    start = time.perf_counter()
    results = tuner.fit()
    seconds = time.perf_counter() - start
    records = JsonStore(folder / "store").evaluations("hang")
    told = Counter((r.raytuner.bracket, r.raytuner.rung) for r in records if r.raytuner is not None)
    done = told == planned(band, tasks)
    failure = None
    if not guard.stalled and (results.errors or not done or not band.engine.finished):
        failure = f"errors {len(results.errors)}, plan recorded {done}, engine finished {band.engine.finished}"
    return {"seconds": seconds, "hang": guard.stalled, "failure": failure, "snapshot": guard.snapshot}


def run(out: Path, quick: bool = False) -> dict[str, Any]:
    """Run the stress (200 runs, 20 with ``quick``); write ``out/results.json`` and ``out/report.md``.

    Args:
        out: The folder to write to.
        quick: 20 runs instead of 200.
    """
    import ray

    out.mkdir(parents=True, exist_ok=True)
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    runs = 20 if quick else 200
    rng = random.Random(0)
    rows: list[dict[str, Any]] = []
    for i in range(runs):
        concurrency, tasks, kind = rng.choice([2, 3, 4]), rng.choice([1, 2]), rng.choice(sorted(TRAINABLES))
        with tempfile.TemporaryDirectory(prefix="band-hang-") as folder:
            row = run_once(seed=i, concurrency=concurrency, tasks=tasks, folder=Path(folder), trainable=kind)
        row.update(run=i, concurrency=concurrency, tasks=tasks, trainable=kind)
        rows.append(row)
        log.info(
            "run %d/%d: %s trainable, concurrency %d, %d task(s), %.1f s%s%s",
            i + 1,
            runs,
            kind,
            concurrency,
            tasks,
            row["seconds"],
            ", HUNG" if row["hang"] else "",
            f", FAILED: {row['failure']}" if row["failure"] else "",
        )
        if row["hang"]:
            log.warning("run %d hung: %s", i, json.dumps(row["snapshot"], default=str))
    seconds = [r["seconds"] for r in rows]
    results = {
        "runs": runs,
        "hangs": sum(r["hang"] for r in rows),
        "failures": sum(bool(r["failure"]) for r in rows),
        "seconds_median": statistics.median(seconds),
        "seconds_max": max(seconds),
        "concurrency": dict(Counter(str(r["concurrency"]) for r in rows)),
        "trainables": dict(Counter(r["trainable"] for r in rows)),
        "hung": [
            {
                "run": r["run"],
                "seed": r["run"],
                "concurrency": r["concurrency"],
                "tasks": r["tasks"],
                "trainable": r["trainable"],
                "snapshot": r["snapshot"],
            }
            for r in rows
            if r["hang"]
        ],
    }
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    (out / "report.md").write_text(
        f"# GPTuneBand iterative path on Ray Tune: stress\n\n{runs} runs (2-4 concurrent trials, checkpoint saves of "
        f"0-0.5 s, one local Ray of 2 CPUs): **{results['hangs']} hangs**, {results['failures']} failures; "
        f"median {results['seconds_median']:.1f} s a run, longest {results['seconds_max']:.1f} s.\n"
    )
    return results
