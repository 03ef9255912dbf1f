"""LCBench through YAHPO Gym's ONNX surrogate, read with onnxruntime (no yahpo-gym needed).

The surrogate predicts the learning curves of MLPs on 34 OpenML tasks: for a
task, a configuration of 7 hyperparameters and an epoch (the fidelity,
1..52) it returns six outputs, ``time``, ``val_accuracy`` (in percent),
``val_cross_entropy``, ``val_balanced_accuracy``, ``test_cross_entropy`` and
``test_balanced_accuracy``. It is stateless: the value at epoch ``e`` does
not depend on earlier calls, so "continuing training" from epoch ``a`` to
``b`` is just asking at ``b``.

The surrogate's files (YAHPO Gym's ``lcbench`` folder, Apache-2.0) are read in
place, never downloaded. The folder is, in order: the ``data_dir`` argument,
``$RAYTUNER_SHARED_DATA/yahpo_lcbench``, or, in a clone of the repository,
its own copy in ``tests/data/yahpo_lcbench``.

Example:
    >>> bench = LCBenchSurrogate()                                        # doctest: +SKIP
    >>> config = {"batch_size": 91, "learning_rate": 0.00316, "momentum": 0.545, "weight_decay": 0.05,
    ...           "num_layers": 3, "max_units": 256, "max_dropout": 0.5}
    >>> round(bench.evaluate(3945, config, epoch=52)["val_accuracy"], 2)  # doctest: +SKIP
    93.4
    >>> bench.problem([3945, 7593]).input_space["task_id"].categories     # doctest: +SKIP
    [3945, 7593]
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from raytuner.errors import InvalidInputError
from raytuner.problem.space import ProblemSpace

__all__ = [
    "LCBenchSurrogate",
    "LCBENCH_TASKS",
    "LCBENCH_VALIDATION_TASKS",
    "OUTPUTS",
    "HYPERPARAMETERS",
    "EPOCHS",
    "default_data_dir",
]

log = logging.getLogger(__name__)

#: The OpenML task ids the benchmarks tune (a spread of the 34).
LCBENCH_TASKS: tuple[int, ...] = (3945, 7593, 34539, 126025, 126026, 126029, 146212, 167104)
#: Ten other tasks, tuned together as a second problem: the benchmarks' validation set, never tuned to.
LCBENCH_VALIDATION_TASKS: tuple[int, ...] = (
    167184,
    167149,
    167152,
    167161,
    167168,
    167181,
    167185,
    167190,
    167200,
    168329,
)
#: The surrogate's outputs, in the order of its ``output`` tensor.
OUTPUTS: tuple[str, ...] = (
    "time",
    "val_accuracy",
    "val_cross_entropy",
    "val_balanced_accuracy",
    "test_cross_entropy",
    "test_balanced_accuracy",
)
#: The tuning parameters, in the order of the ``x_cont`` columns after the epoch.
HYPERPARAMETERS: tuple[str, ...] = (
    "batch_size",
    "learning_rate",
    "momentum",
    "weight_decay",
    "num_layers",
    "max_units",
    "max_dropout",
)
#: The fidelity range (epochs).
EPOCHS: tuple[int, int] = (1, 52)
_TYPES = {"uniform_int": "integer", "uniform_float": "real"}


def default_data_dir() -> Path:
    """``$RAYTUNER_SHARED_DATA/yahpo_lcbench`` if the variable is set, else the clone's ``tests/data/yahpo_lcbench``."""
    env = os.environ.get("RAYTUNER_SHARED_DATA")
    if env:
        return Path(env) / "yahpo_lcbench"
    return Path(__file__).resolve().parents[2] / "tests/data/yahpo_lcbench"


class LCBenchSurrogate:
    """The LCBench surrogate of ``data_dir`` (default: :func:`default_data_dir`); see the module docstring.

    The ONNX session runs on one thread (trials run side by side on few cores).

    Args:
        data_dir: the surrogate's folder (default ``None``: :func:`default_data_dir`).
    """

    def __init__(self, data_dir: str | Path | None = None) -> None:
        root = Path(data_dir) if data_dir is not None else default_data_dir()
        folder = root / "lcbench" if (root / "lcbench").is_dir() else root
        needed = [folder / name for name in ("model.onnx", "encoding.json", "config_space.json")]
        missing = [str(p) for p in needed if not p.is_file()]
        if missing:
            raise FileNotFoundError(
                f"LCBench surrogate not found in {root}: missing {', '.join(missing)}. Point data_dir or "
                "$RAYTUNER_SHARED_DATA (the folder holding yahpo_lcbench/) at the YAHPO lcbench data."
            )
        self.data_dir = folder
        try:
            import onnxruntime
        except ImportError as exc:
            raise ImportError("the LCBench surrogate needs onnxruntime: pip install 'raytuner[examples]'") from exc
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        encoding = json.loads((folder / "encoding.json").read_text(encoding="utf-8"))["OpenML_task_id"]
        space = json.loads((folder / "config_space.json").read_text(encoding="utf-8"))["hyperparameters"]
        by_name = {p["name"]: p for p in space}
        #: Every task id the surrogate knows, in the config space's order.
        self.task_ids: tuple[int, ...] = tuple(int(c) for c in by_name["OpenML_task_id"]["choices"])
        self._index = {t: int(encoding[str(t)]) for t in self.task_ids}
        self._parameters = [
            {
                "name": name,
                "type": _TYPES[by_name[name]["type"]],
                "lower_bound": by_name[name]["lower"],
                "upper_bound": by_name[name]["upper"],
                "log": bool(by_name[name]["log"]),
            }
            for name in HYPERPARAMETERS
        ]
        self._parameter_space = ProblemSpace.parse(
            {
                "input_space": [{"name": "task_id", "type": "categorical", "categories": list(self.task_ids)}],
                "parameter_space": self._parameters,
                "output_space": [{"name": "val_accuracy", "goal": "maximize"}],
            }
        ).parameter_space

    def check_task(self, task_id: Any) -> int:
        """``task_id`` as an int if the surrogate knows it, else an error listing the known ids.

        Args:
            task_id: the task id to check (an int or a string of one).
        """
        try:
            value: int | None = None if isinstance(task_id, bool) else int(str(task_id))
        except ValueError:
            value = None
        if value not in self._index:
            raise InvalidInputError("task_id", f"{task_id!r} is not an LCBench task", allowed=self.task_ids)
        return int(task_id)

    def problem(self, task_ids: Sequence[int] | None = None) -> ProblemSpace:
        """The tuning problem: ``task_id`` (categorical over ``task_ids``, default all 34), the 7
        hyperparameters (log-scaled as in the config space) and ``val_accuracy``, maximised.

        Args:
            task_ids: the tasks to offer (default ``None``: all 34).
        """
        ids = list(self.task_ids) if task_ids is None else [self.check_task(t) for t in task_ids]
        return ProblemSpace.parse(
            {
                "input_space": [{"name": "task_id", "type": "categorical", "categories": ids}],
                "parameter_space": self._parameters,
                "output_space": [{"name": "val_accuracy", "goal": "maximize"}],  # in [0, 100]: no constraint
            }
        )

    @staticmethod
    def _check_epoch(epoch: Any) -> float:
        lo, hi = EPOCHS
        if (
            isinstance(epoch, bool)
            or not isinstance(epoch, (int, float, np.integer, np.floating))
            or not math.isfinite(float(epoch))
            or not lo <= float(epoch) <= hi
        ):
            raise InvalidInputError("epoch", f"{epoch!r} is outside [{lo}, {hi}]")
        return float(epoch)

    def evaluate_many(
        self, task_ids: Sequence[int | str], configs: Sequence[Mapping[str, Any]], epochs: Sequence[float]
    ) -> np.ndarray:
        """The six outputs (columns in :data:`OUTPUTS` order) for each (task, config, epoch) row.

        Args:
            task_ids: the task of each row (an int or a string of one).
            configs: the configuration of each row (the 7 hyperparameters).
            epochs: the epochs of each row.
        """
        if not len(task_ids) == len(configs) == len(epochs):
            raise InvalidInputError(
                "configs",
                f"task_ids, configs and epochs differ in length: {len(task_ids)}, {len(configs)}, {len(epochs)}",
            )
        if not configs:
            return np.zeros((0, len(OUTPUTS)))
        cat = np.array([[self._index[self.check_task(t)]] for t in task_ids], dtype=np.int32)
        rows = []
        for n, (config, epoch) in enumerate(zip(configs, epochs)):
            checked = self._parameter_space.check(config, f"configs[{n}]")
            rows.append([self._check_epoch(epoch), *(float(checked[name]) for name in HYPERPARAMETERS)])
        out = self._session.run(None, {"x_cat": cat, "x_cont": np.asarray(rows, dtype=np.float32)})[0]
        return np.asarray(out, dtype=float)

    def evaluate(self, task_id: int, config: Mapping[str, Any], epoch: float) -> dict[str, float]:
        """All six outputs of one configuration of ``task_id`` after ``epoch`` epochs.

        Args:
            task_id: the LCBench task.
            config: the 7 hyperparameters.
            epoch: how many epochs.
        """
        row = self.evaluate_many([task_id], [config], [epoch])[0]
        return {name: float(v) for name, v in zip(OUTPUTS, row)}
