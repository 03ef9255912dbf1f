"""A stored Model_LCM means the same model in GPTune: its flat list, read as GPTune reads it, predicts ours.

The reader below does what GPTune's ``Model_LCM`` rebuild does (``GPTune/lcm.py``, ``gptuneclcm/lcm.c``,
GPy's exact inference): parameters on GPTune's coordinates (a real at ``(x − lo)/(hi − lo)``, an integer at
``(round(x) − lo)/(hi − lo)``, the i-th of k categories at ``i/k + 0.01``, of two at 0 and 1), a kernel
``Σ_q (w_q w_qᵀ + diag κ_q) var_q exp(−Σ_d Δ_d² / (2 θ_qd²))``, noise ``σ_t + 1e-8`` and a zero mean on
the raw outputs. ``tests/test_gptune_reader_tool.py`` checks the same against GPTune's own code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from raytuner.models import GPTUNE_LCM, LCM, LCMOptions, TrainingData
from raytuner.models.executors import InlineExecutor
from raytuner.models.options import UNSTORED_OPTIONS
from raytuner.models.persistence import GPY_JITTER, gptune_hyperparameters, surrogate_record
from raytuner.problem.records import FunctionEvaluation
from raytuner.problem.space import ProblemSpace, Space

PROBLEM = ProblemSpace.parse(
    {
        "input_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 4}],
        "parameter_space": [
            {"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
            {"name": "k", "type": "integer", "lower_bound": 1, "upper_bound": 8},
            {"name": "alg", "type": "categorical", "categories": ["lu", "qr", "svd"]},
            {"name": "pivot", "type": "categorical", "categories": ["no", "yes"]},
        ],
        "output_space": [{"name": "y", "type": "real"}],
    }
)
TASKS = [{"t": 1.0}, {"t": 2.5}]


def _gptune_coordinates(space: Space, configs: list[dict[str, Any]]) -> np.ndarray:
    columns = []
    for p in space:
        values = [c[p.name] for c in configs]
        if p.type == "categorical":
            k = len(p.categories)
            index = np.array([p.categories.index(v) for v in values], dtype=float)
            columns.append(index if k == 2 else index / k + 0.01)
        else:
            low, high = p.lower_bound, p.upper_bound
            x = np.round(values) if p.type == "integer" else np.asarray(values, dtype=float)
            columns.append((x - low) / (high - low))
    return np.column_stack(columns)


def _gptune_predict(
    flat: list[float],
    latent: int,
    tasks: int,
    dims: int,
    X: np.ndarray,
    task: np.ndarray,
    y: np.ndarray,
    Xs: np.ndarray,
    t: int,
) -> np.ndarray:
    h = np.asarray(flat)
    theta = h[: latent * dims].reshape(latent, dims)
    var = h[latent * dims : latent * dims + latent]
    kappa = h[latent * (dims + 1) : latent * (dims + 1 + tasks)].reshape(latent, tasks)
    sigma = h[latent * (dims + 1 + tasks) : latent * (dims + 1 + tasks) + tasks]
    ws = h[latent * (dims + 1 + tasks) + tasks :].reshape(latent, tasks)

    def k(A: np.ndarray, ta: np.ndarray, B: np.ndarray, tb: np.ndarray) -> np.ndarray:
        out = np.zeros((len(A), len(B)))
        for q in range(latent):
            coregion = np.outer(ws[q], ws[q]) + np.diag(kappa[q])
            r2 = (((A[:, None, :] - B[None, :, :]) / theta[q]) ** 2).sum(-1)
            out += coregion[np.ix_(ta, tb)] * var[q] * np.exp(-r2 / 2)
        return out

    K = k(X, task, X, task) + np.diag(sigma[task] + GPY_JITTER)
    return k(Xs, np.full(len(Xs), t), X, task) @ np.linalg.solve(K, y)


def _records(seed: int, offset: float) -> list[FunctionEvaluation]:
    rng = np.random.default_rng(seed)
    records = []
    for task in TASKS:
        for _ in range(12):
            c: dict[str, Any] = {
                "x": float(rng.random()),
                "k": int(rng.integers(1, 9)),
                "alg": str(rng.choice(["lu", "qr", "svd"])),
                "pivot": str(rng.choice(["no", "yes"])),
            }
            y = (
                offset
                + (c["x"] - 0.2 * task["t"]) ** 2
                + 0.05 * c["k"]
                + 0.3 * (c["alg"] == "svd")
                + 0.1 * (c["pivot"] == "yes")
            )
            records.append(FunctionEvaluation.create(task, c, {"y": y}))
    return records


@pytest.mark.parametrize("offset", [0.0, 250.0])
def test_gptunes_reading_of_a_stored_model_predicts_ours(offset: float) -> None:
    records = _records(3, offset)
    data, uids = TrainingData.from_records(PROBLEM, TASKS, records)
    options = LCMOptions(n_starts=2, max_iterations=100, **GPTUNE_LCM)
    fitted = LCM(options).fit(data, seed=0, executor=InlineExecutor())
    record = surrogate_record(fitted, PROBLEM, TASKS, uids, modeler="test")
    assert record.modeler == "Model_LCM"
    assert fitted.transform.means.tolist() == [0.0, 0.0], "GPTune's prior mean is zero: the fit is not centred"
    by_uid = {r.uid: r for r in records}
    used = [by_uid[u] for u in record.function_evaluations]
    X = _gptune_coordinates(PROBLEM.parameter_space, [r.tuning_parameter for r in used])
    task = np.array([TASKS.index(dict(r.task_parameter)) for r in used])
    y = np.array([r.evaluation_result["y"] for r in used])
    rng = np.random.default_rng(5)
    for t in range(len(TASKS)):
        configs = PROBLEM.parameter_space.decode(rng.random((20, 4)))
        ours = fitted.predict(t, PROBLEM.parameter_space.encode(configs))[0]
        theirs = _gptune_predict(
            record.hyperparameters,
            fitted.hyperparameters.shape[0],
            len(TASKS),
            4,
            X,
            task,
            y,
            _gptune_coordinates(PROBLEM.parameter_space, configs),
            t,
        )
        np.testing.assert_allclose(theirs, ours, rtol=1e-6, atol=1e-9 * max(1.0, offset))


@pytest.mark.parametrize(
    "options,gptunes",
    [
        ({}, False),
        ({"kernel": "rbf"}, False),
        ({"kernel": "rbf", "centre": False}, True),
        ({**GPTUNE_LCM, "log_transform": True}, False),
        ({**GPTUNE_LCM, "rank": 2}, False),
        ({**GPTUNE_LCM, "categorical": [2]}, False),
        ({**GPTUNE_LCM, "categorical": [3]}, True),
    ],
)
def test_only_gptunes_model_has_a_gptune_list(options: dict[str, Any], gptunes: bool) -> None:
    """A Matérn kernel, centred or log outputs, rank 2, three categories compared by category: not GPTune's.

    Two categories compared by category are GPTune's two positions, 0 and 1; priors change the fit, not the form.
    """
    records = _records(4, 1.0)
    data, _ = TrainingData.from_records(PROBLEM, TASKS, records)
    fitted = LCM(LCMOptions(n_starts=1, max_iterations=20, **options)).fit(data, seed=0, executor=InlineExecutor())
    assert (gptune_hyperparameters(fitted, PROBLEM.parameter_space) is not None) == gptunes


def test_models_stored_before_the_option_were_centred() -> None:
    assert LCMOptions(**UNSTORED_OPTIONS).centre and LCMOptions.from_dict({"kernel": "rbf"}).centre
    assert not LCMOptions.from_dict(LCMOptions(**GPTUNE_LCM).to_dict()).centre
