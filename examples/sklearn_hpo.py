"""Tune a scikit-learn MLPClassifier on two bundled datasets with GPTuneBand (iterative fidelity: epochs).

Real training, no surrogate: the tasks are sklearn's ``digits`` and
``breast_cancer`` datasets (a categorical task parameter ``dataset``); each
has a fixed, seeded, stratified train/validation split with features
standardised on the training part. The tuning parameters are the hidden layer
width, the L2 penalty ``alpha``, Adam's ``learning_rate_init``, the
mini-batch size and the activation; the objective is the validation accuracy
(maximised). The fidelity is the number of epochs, trained one at a time with
``partial_fit`` (iterative mode, integer fidelities): a successive-halving
promotion continues training from its parent's checkpoint instead of
starting again.

Each epoch visits the training set in a permutation drawn from (seed, epoch),
so a run restored from a checkpoint trains exactly as an uninterrupted one.

Run (through Ray Tune with raytuner.schedulers.GPTuneBandScheduler when available,
else through the sequential engine raytuner.engines.GPTuneBand):
    python examples/sklearn_hpo.py                 # [b_min, b_max, eta] = [1, 27, 3] epochs
    python examples/sklearn_hpo.py --quick         # [1, 4, 2]: 18 Ray trials
    python examples/sklearn_hpo.py --runner engine # force the sequential engine
"""

from __future__ import annotations

from _extras import json_logger_for_resumed_trials, require, temporary_store

require(__file__, "sklearn", "numpy", "ray")

import argparse
import logging
import math
import os
import pickle
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("sklearn_hpo")

DATASETS = ("digits", "breast_cancer")

#: Task space (dataset), tuning space and objective of the MLP problem.
SKLEARN_PROBLEM: dict[str, Any] = {
    "input_space": [{"name": "dataset", "type": "categorical", "categories": list(DATASETS)}],
    "parameter_space": [
        {"name": "hidden_units", "type": "integer", "lower_bound": 8, "upper_bound": 256, "log": True},
        {"name": "alpha", "type": "real", "lower_bound": 1e-6, "upper_bound": 1e-1, "log": True},
        {"name": "learning_rate_init", "type": "real", "lower_bound": 1e-4, "upper_bound": 3e-1, "log": True},
        {"name": "batch_size", "type": "integer", "lower_bound": 16, "upper_bound": 256, "log": True},
        {"name": "activation", "type": "categorical", "categories": ["relu", "tanh", "logistic"]},
    ],
    "output_space": [{"name": "val_accuracy", "type": "real", "goal": "maximize"}],
}

TUNING_NAMES = [p["name"] for p in SKLEARN_PROBLEM["parameter_space"]]
STATE_FILE = "trainer.pkl"


_SPLITS: dict[tuple[str, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}


def load_split(dataset: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(X_train, X_val, y_train, y_val)`` of a bundled dataset: 75/25 stratified split, standardised.

    >>> X_train, X_val, y_train, y_val = load_split("breast_cancer")
    >>> X_train.shape[1], len(y_val), abs(float(X_train.mean())) < 1e-9
    (30, 143, True)
    """
    from sklearn import datasets
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    # a plain dict, not functools.lru_cache: Ray pickles this script's functions by value, and an
    # lru_cache wrapper would be pickled by reference to a __main__ that the workers do not have
    if (dataset, seed) not in _SPLITS:
        loaders = {"digits": datasets.load_digits, "breast_cancer": datasets.load_breast_cancer}
        if dataset not in loaders:
            raise ValueError(f"unknown dataset {dataset!r}; known: {sorted(loaders)}")
        X, y = loaders[dataset](return_X_y=True)
        X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)
        scaler = StandardScaler().fit(X_train)
        _SPLITS[dataset, seed] = (scaler.transform(X_train), scaler.transform(X_val), y_train, y_val)
    return _SPLITS[dataset, seed]


class EpochTrainer:
    """An MLPClassifier trained one epoch at a time on one dataset; picklable to a checkpoint directory.

    >>> config = {"hidden_units": 16, "alpha": 1e-4, "learning_rate_init": 1e-2, "batch_size": 64,
    ...           "activation": "relu"}
    >>> trainer = EpochTrainer("breast_cancer", config)
    >>> accuracy = trainer.train_epoch()
    >>> trainer.epoch, 0.5 < accuracy <= 1.0
    (1, True)
    """

    def __init__(self, dataset: str, config: Mapping[str, Any], seed: int = 0) -> None:
        from sklearn.neural_network import MLPClassifier

        self.dataset, self.seed, self.epoch = dataset, seed, 0
        self.config = {name: config[name] for name in TUNING_NAMES}
        self.model = MLPClassifier(
            hidden_layer_sizes=(int(config["hidden_units"]),),
            activation=config["activation"],
            alpha=float(config["alpha"]),
            learning_rate_init=float(config["learning_rate_init"]),
            batch_size=int(config["batch_size"]),
            shuffle=False,
            random_state=seed,
        )

    def train_epoch(self) -> float:
        """One pass over the training set in this epoch's permutation; returns the validation accuracy."""
        X_train, _, y_train, _ = load_split(self.dataset)
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(y_train))
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            self.model.partial_fit(X_train[order], y_train[order], classes=np.unique(y_train))
        self.epoch += 1
        return self.accuracy()

    def train_to(self, epochs: int) -> float:
        """Train up to ``epochs`` epochs in all; returns the validation accuracy."""
        accuracy = self.accuracy() if self.epoch else float("nan")
        while self.epoch < epochs:
            accuracy = self.train_epoch()
        return accuracy

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Class predictions of the current model."""
        return self.model.predict(X)

    def accuracy(self) -> float:
        """Validation accuracy of the current model (NaN before the first epoch or for non-finite weights)."""
        if not self.epoch or not all(np.isfinite(w).all() for w in self.model.coefs_):
            return float("nan")
        _, X_val, _, y_val = load_split(self.dataset)
        return float(np.mean(self.model.predict(X_val) == y_val))

    def state(self) -> bytes:
        """The trainer as bytes: a pickle of plain data and the sklearn model (no class of this script,
        which a Ray worker could not import by name)."""
        return pickle.dumps(
            {
                "dataset": self.dataset,
                "config": self.config,
                "seed": self.seed,
                "epoch": self.epoch,
                "model": self.model,
            }
        )

    @classmethod
    def from_state(cls, data: bytes) -> EpochTrainer:
        """The trainer that :meth:`state` returned."""
        state = pickle.loads(data)
        trainer = cls.__new__(cls)
        trainer.dataset, trainer.config, trainer.seed = state["dataset"], state["config"], state["seed"]
        trainer.epoch, trainer.model = state["epoch"], state["model"]
        return trainer

    def save(self, directory: str | Path) -> Path:
        """Write the trainer (model, optimiser state, epoch) into the checkpoint directory ``directory``."""
        path = Path(directory) / STATE_FILE
        path.write_bytes(self.state())
        return path

    @classmethod
    def restore(cls, directory: str | Path) -> EpochTrainer:
        """The trainer saved in ``directory`` by :meth:`save`."""
        return cls.from_state((Path(directory) / STATE_FILE).read_bytes())


# -- tuning ----------------------------------------------------------------------------------------


def iterative_trainable(config: dict[str, Any], *, max_epochs: int, seed: int = 0) -> None:
    """Ray Tune trainable: one epoch per report, a checkpoint with every report, restored on resume."""
    from ray import tune

    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d:
            trainer = EpochTrainer.restore(d)
    else:
        trainer = EpochTrainer(config["dataset"], config, seed=seed)
    while trainer.epoch < max_epochs:
        accuracy = trainer.train_epoch()
        with tempfile.TemporaryDirectory() as d:
            trainer.save(d)
            tune.report(
                {"val_accuracy": accuracy, "epoch": trainer.epoch}, checkpoint=tune.Checkpoint.from_directory(d)
            )


def run_engine(
    problem: Any,
    tasks: Sequence[Mapping[str, Any]],
    args: argparse.Namespace,
    executor: Any = None,
    lcm: Any = None,
) -> tuple[Any, list[Any]]:
    """Tune sequentially with the ask/tell engine ``raytuner.engines.GPTuneBand``.

    Returns the engine and the evaluation records in order.

    A promotion continues a copy of its parent's trainer (kept pickled by
    evaluation uid, as a Ray checkpoint would be).
    """
    from raytuner.engines import GPTuneBand
    from raytuner.problem.records import FunctionEvaluation

    band = GPTuneBand(
        problem,
        tasks,
        seed=args.seed,
        b_min=args.b_min,
        b_max=args.b_max,
        eta=args.eta,
        passes=args.passes,
        fidelity_mode="iterative",
        integer_fidelities=True,
        executor=executor,
        lcm=lcm,
    )
    snapshots: dict[str, bytes] = {}
    records: list[Any] = []
    while not band.finished:
        s = band.ask()
        assert s.fidelity is not None  # GPTuneBand gives every suggestion its fidelity
        parent = s.provenance.parent
        trainer = (
            EpochTrainer.from_state(snapshots[parent])
            if parent in snapshots
            else EpochTrainer(s.task["dataset"], s.config, seed=args.seed)
        )
        start = trainer.epoch
        try:
            accuracy = trainer.train_to(int(round(s.fidelity)))
        except Exception as exc:  # a training that raises is a failed evaluation
            record = FunctionEvaluation.create(
                s.task, s.config, failure=f"error: {type(exc).__name__}: {exc}", provenance=s.provenance
            )
        else:
            record = FunctionEvaluation.create(
                s.task,
                s.config,
                {"val_accuracy": accuracy},
                provenance=s.provenance,
                additional_output={"epoch": trainer.epoch},
            )
            snapshots[record.uid] = trainer.state()
        band.tell(record)
        records.append(record)
        value = record.value("val_accuracy")
        why = record.raytuner.failure_message if record.raytuner is not None else None
        log.info(
            "eval %3d %-13s bracket %s rung %s epochs %2d -> %2d: %s",
            len(records),
            s.task["dataset"],
            s.provenance.bracket,
            s.provenance.rung,
            start,
            int(round(s.fidelity)),
            f"{value:.4f}" if value is not None else f"FAILED ({why})",
        )
    return band, records


def run_ray(problem: Any, tasks: Sequence[Mapping[str, Any]], args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """Tune through Ray Tune with the trial scheduler ``raytuner.schedulers.GPTuneBandScheduler``.

    Returns the scheduler and the evaluation records it stored. The scheduler pauses a trial at the
    end of its rung; a promoted trial resumes from its last checkpoint.
    """
    import ray
    from ray import tune
    from raytuner.schedulers import GPTuneBandOptions, GPTuneBandScheduler
    from raytuner.searchers import TuningProgress

    from raytuner.engines import BanditStructure
    from raytuner.store import JsonStore

    store = Path(args.store).resolve() if args.store else temporary_store("sklearn_hpo_")
    band = GPTuneBandScheduler(
        problem,
        tasks,
        str(store),
        args.problem,
        seed=args.seed,
        structure=BanditStructure.hyperband(args.b_min, args.b_max, args.eta, integer=True),
        options=GPTuneBandOptions(passes=args.passes, fidelity_mode="iterative", time_attr="training_iteration"),
    )
    trainable = tune.with_parameters(iterative_trainable, max_epochs=int(args.b_max), seed=args.seed)
    # The store keeps every result: of Ray's per-trial logger files only result.json stays (ResultGrid reads it),
    # written by a logger that keeps the driver's file when a paused trial resumes (Ray's fetched it back from
    # storage_path before Ray had synced it there: one "Remote file not found" warning per resume)
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    local = args.address == "local"  # a fresh local Ray, not a stale or foreign running one
    ray.init(
        address=args.address,
        num_cpus=args.concurrent if local else None,
        include_dashboard=False,
        log_to_driver=False,
        ignore_reinit_error=True,
    )
    try:
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=band.searcher(),
                scheduler=band,
                metric="val_accuracy",
                mode="max",  # the problem maximises it too
                num_samples=-1,
                max_concurrent_trials=args.concurrent,
                reuse_actors=True,
            ),
            run_config=tune.RunConfig(
                storage_path=str(store / "ray"),
                name=args.problem,
                verbose=0,
                callbacks=[TuningProgress(band), json_logger_for_resumed_trials()],
            ),
        )
        results = tuner.fit()  # a ResultGrid: one Result per trial, the failed ones in results.errors
        if results.errors:
            log.warning("%d of %d trials failed", len(results.errors), len(results))
    finally:
        ray.shutdown()
    log.info("evaluations stored under %s", store)
    return band, JsonStore(store).evaluations(args.problem)


def print_summary(
    tasks: Sequence[Mapping[str, Any]], records: Sequence[Any], best: Sequence[Any], epochs: float
) -> None:
    """Evaluations, failures and normalised cost per task, then the best configuration at b_max epochs."""
    print(f"\nAt {epochs:g} epochs (b_max):")
    from raytuner.analysis import task_summary

    print("\n".join(task_summary(tasks, records, best, "val_accuracy")))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small run: [b_min, b_max, eta] = [1, 4, 2]")
    parser.add_argument(
        "--runner",
        choices=["ray", "engine"],
        default="ray",
        help="ray: Ray Tune + raytuner.schedulers.GPTuneBandScheduler; engine: sequential ask/tell",
    )
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS), help="the tasks")
    parser.add_argument("--b-min", type=float, default=1.0, help="fewest epochs")
    parser.add_argument("--b-max", type=float, default=None, help="most epochs (default 27, 4 with --quick)")
    parser.add_argument("--eta", type=int, default=None, help="halving factor (default 3, 2 with --quick)")
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrent", type=int, default=2, help="trials at once under Ray (and Ray CPUs)")
    parser.add_argument(
        "--address",
        default="local",
        help="Ray address: 'local' starts a fresh local Ray, 'auto' or host:port joins a cluster",
    )
    parser.add_argument(
        "--store",
        default=None,
        help="JSON store directory for the Ray runner (default: a temporary one, removed at the end)",
    )
    parser.add_argument("--problem", default="sklearn-mlp", help="problem name in the store")
    args = parser.parse_args(argv)
    if args.b_max is None:
        args.b_max = 4.0 if args.quick else 27.0
    if args.eta is None:
        args.eta = 2 if args.quick else 3
    if not math.isclose(args.b_max, round(args.b_max)):
        parser.error("--b-max is a number of epochs: an integer")
    return args


def main(argv: list[str] | None = None) -> list[Any]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from raytuner.problem.space import ProblemSpace

    problem = ProblemSpace.parse(SKLEARN_PROBLEM)
    tasks = [{"dataset": name} for name in args.datasets]
    runner = args.runner
    log.info(
        "runner %s: tasks %s, [b_min, b_max, eta] = [%g, %g, %d] epochs",
        runner,
        args.datasets,
        args.b_min,
        args.b_max,
        args.eta,
    )
    start = time.perf_counter()
    band, records = (run_ray if runner == "ray" else run_engine)(problem, tasks, args)
    elapsed = time.perf_counter() - start
    best = band.best_per_task()
    print_summary(tasks, records, best, args.b_max)
    print(f"tuning took {elapsed:.1f} s")
    return best


if __name__ == "__main__":
    main()
