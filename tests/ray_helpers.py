"""Helpers shared by the Ray test modules (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune.experiment import Trial
from ray.tune.search import Searcher
from record_helpers import known, provenance

from benchmarks.band_hang import StallGuard as StallGuard  # the Ray tests' guard against a run that never ends
from raytuner.problem.records import FunctionEvaluation
from raytuner.store import HistoryStore

#: A function trainable, as ``Tuner`` takes it.
Trainable = Callable[[dict[str, Any]], None]


def each_result(grid: tune.ResultGrid) -> list[tune.Result]:
    """The results of ``grid``, in its order (a ``ResultGrid`` is indexed, not typed as iterable)."""
    return [grid[i] for i in range(len(grid))]


class InterruptOnce(tune.Callback):
    """Interrupt the run (as Ctrl+C would) once, at the first completion from the ``after``-th on that
    leaves another trial in flight; the callback is restored with the run.

    Waiting for a trial in flight (not only counting completions) makes the interrupt land where the tests
    need it whatever the timing: on a loaded machine the next trial may not have started yet at the
    ``after``-th completion.
    """

    def __init__(self, after: int, marker: Path) -> None:
        self.after, self.marker, self.done = after, marker, 0

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self.done += 1
        in_flight = any(t is not trial and t.status in ("PENDING", "RUNNING") for t in trials)
        if self.done >= self.after and in_flight and not self.marker.exists():
            self.marker.touch()
            os.kill(os.getpid(), signal.SIGINT)  # Tune's handler ends the run, saving its state


def interrupted_then_restored(
    searcher: Searcher, trainable: Trainable, store: HistoryStore, problem_name: str, samples: int, tmp_path: Path
) -> tuple[tune.Tuner, list[FunctionEvaluation], dict[str, Any]]:
    """Run ``samples`` trials under ``Tuner``, interrupted after 3 and restored; check nothing is lost.

    Returns ``(restored_tuner, records, saved_searcher_state)`` for further checks.
    """
    import json

    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=searcher, num_samples=samples, max_concurrent_trials=2, reuse_actors=True
        ),
        run_config=tune.RunConfig(
            name="exp",
            storage_path=str(tmp_path / "ray"),
            verbose=0,
            callbacks=[InterruptOnce(3, tmp_path / "interrupted")],
        ),
    )
    tuner.fit()
    before = store.evaluations(problem_name)
    experiment = tmp_path / "ray" / "exp"
    assert (tmp_path / "interrupted").exists() and 3 <= len(before) < samples
    assert tune.Tuner.can_restore(str(experiment))
    saved = json.loads(max(experiment.glob("searcher-state-*")).read_text())
    # the searcher's checkpoint holds the session id; its trials in flight are those the store's ledger
    # holds as asked by that session and not told
    asked = {d["trial_id"] for d in store.ledger().read("trials", session_id=saved["session_id"])}
    in_flight = asked - {provenance(r).trial_id for r in before}
    assert in_flight and not in_flight & {provenance(r).trial_id for r in before}

    restored = tune.Tuner.restore(str(experiment), trainable=trainable)
    results = restored.fit()
    records = store.evaluations(problem_name)
    assert len(results) == samples and not results.errors
    assert len(records) == samples and all(r.status == "ok" for r in records)
    assert records[: len(before)] == before  # nothing lost
    trial_ids = [provenance(r).trial_id for r in records]
    assert sorted(trial_ids, key=str) == sorted(
        known(result.metrics)["trial_id"] for result in each_result(results)
    )  # each trial once
    assert in_flight <= set(trial_ids)  # the adopted trials' results were recorded
    assert {provenance(r).session_id for r in records} == {saved["session_id"]}
    return restored, records, saved


def tuner_with_failures(
    searcher: Searcher,
    trainable: Trainable,
    store: HistoryStore,
    problem_name: str,
    samples: int,
    tmp_path: Path,
    diverges: Callable[[float], bool],
) -> tuple[tune.ResultGrid, list[FunctionEvaluation]]:
    """Run ``samples`` trials under ``Tuner`` with a trainable that raises where ``diverges(x)``; check the records.

    Returns ``(results, records)``.
    """
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=searcher, num_samples=samples, max_concurrent_trials=2, reuse_actors=True, metric="y", mode="min"
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "ray"), verbose=0),
    )
    results = tuner.fit()
    records = store.evaluations(problem_name)
    assert len(records) == samples
    failed = [r for r in records if r.status == "failed"]
    assert failed and all(diverges(r.tuning_parameter["x"]) for r in failed)
    assert all(provenance(r).failure_message == "trial raised an error" and r.value("y") is None for r in failed)
    assert not any(diverges(r.tuning_parameter["x"]) for r in records if r.status == "ok")
    return results, records
