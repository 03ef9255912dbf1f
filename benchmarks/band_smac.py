"""SMAC3's facades on LCBench, peers of the band benchmark (:mod:`benchmarks.band`).

:func:`run_lcbench_smac` runs SMAC3 2.4's ``MultiFidelityFacade`` (random
forest, Hyperband intensifier), or its ``HyperparameterOptimizationFacade``
at ``b_max`` (``facade="hpo"``), once per task, in this process and one trial
at a time through its ask/tell interface (no dask), and returns one
:class:`~benchmarks.band_peers.Trace` per task as the other runners do.

- The Hyperband brackets: ``max_budget = b_max`` and ``min_budget = b_max
  η^-s_max`` (:func:`smac_budgets`), so SMAC's Hyperband has the structure's
  ``s_max + 1`` brackets; its budgets (52 η^-k: 1.93, 5.78, 17.3, 52 epochs)
  are rounded to whole epochs (2, 6, 17, 52, the structure's fidelities).
- The budget: ``budget × b_max`` epochs per task, charged as the Ray tuners
  are (:class:`~benchmarks.band_ray_budget.ReportBudget`): the LCBench
  surrogate is stateless, so a configuration promoted from ``a`` to ``b``
  epochs continues training and pays ``b - a``. The run stops at the first
  trial that would overrun the budget. SMAC's ``n_trials`` (which sizes its
  initial design) is its own estimate for that many epochs,
  ``get_n_trials_for_hyperband_multifidelity``.
- Seeded per task (``seed * 1000 + j``) and ``deterministic=True``; SMAC
  minimises ``100 - val_accuracy``. The answer is the ``val_accuracy`` at
  ``b_max`` of the best configuration at the highest fidelity reached. The
  same seed gives the same trace within a process; across processes SMAC's
  choices also depend on Python's string hashing (fix ``PYTHONHASHSEED`` to
  repeat a run exactly).

smac is in the ``[bench]`` extra, not in ``[test]``; without it
:func:`run_lcbench_smac` raises ``ImportError`` (the benchmark then skips
this peer).

Example (the budgets need no smac):
    >>> from raytuner.engines import BanditStructure
    >>> structure = BanditStructure.hyperband(1, 52, 3, integer=True)
    >>> [round(b, 3) for b in smac_budgets(structure)]
    [1.926, 52.0]

With smac installed, a small run takes some seconds (no Ray needed)::

    small = BanditStructure.hyperband(2, 8, 2, integer=True)
    (trace,) = run_lcbench_smac(LCBenchSurrogate(), [3945], small, small.cost_per_pass("iterative"), seed=0)
    sum(trace.costs), trace.final      # (6.5, 98.37...): the budget, val_accuracy at 8 epochs
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from benchmarks.band_peers import Trace
from benchmarks.band_ray import budget_trace, config_space
from benchmarks.band_ray_budget import ReportBudget
from raytuner.test_problems.lcbench import EPOCHS, HYPERPARAMETERS, LCBenchSurrogate

if TYPE_CHECKING:
    from raytuner.engines import BanditStructure

__all__ = ["Facade", "smac_budgets", "run_lcbench_smac"]

log = logging.getLogger(__name__)

#: SMAC3's facade: multi-fidelity (Hyperband) or black-box hyperparameter optimisation at ``b_max``.
Facade = Literal["multi_fidelity", "hpo"]


def smac_budgets(structure: BanditStructure) -> tuple[float, float]:
    """SMAC's ``(min_budget, max_budget)`` for ``structure``: ``(b_max η^-s_max, b_max)``, a hair lower at the
    bottom so that SMAC's ``⌊log_η(max/min)⌋`` is ``s_max`` whatever the rounding.

    Args:
        structure: the bandit structure (its ``b_max``, ``η`` and ``s_max``).

    >>> from raytuner.engines import BanditStructure
    >>> [round(b, 6) for b in smac_budgets(BanditStructure.hyperband(2, 8, 2, integer=True))]
    [2.0, 8.0]
    """
    b_max = float(structure.b_max)
    return b_max * float(structure.eta) ** -structure.s_max * (1 - 1e-9), b_max


@contextlib.contextmanager
def _quiet_smac() -> Iterator[None]:
    """SMAC's loggers at WARNING for one run (it logs every bracket at INFO); restored afterwards."""
    logger = logging.getLogger("smac")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _not_called(config: Any, seed: int = 0, budget: float = 0.0) -> float:
    """The multi-fidelity facade's target function; the ask/tell loop evaluates trials itself."""
    raise RuntimeError("run_lcbench_smac evaluates trials through ask/tell")


def _not_called_black_box(config: Any, seed: int = 0) -> float:
    """The black-box facade's target function (it takes no budget); never called, as :func:`_not_called`."""
    return _not_called(config, seed)


def _one_task(
    surrogate: LCBenchSurrogate,
    task_id: int,
    structure: BanditStructure,
    limit: float,
    seed: int,
    folder: Path,
    facade: Facade = "multi_fidelity",
) -> Trace:
    """SMAC on one task until ``limit`` epochs are spent: the task's trace.

    The multi-fidelity facade runs Hyperband over the structure's budgets; the black-box one (``"hpo"``)
    ``⌊limit / b_max⌋`` trials at ``b_max``.
    """
    from smac import HyperparameterOptimizationFacade, MultiFidelityFacade, Scenario
    from smac.intensifier.hyperband_utils import get_n_trials_for_hyperband_multifidelity
    from smac.runhistory.dataclasses import TrialValue

    b_min, b_max = smac_budgets(structure)
    space = config_space(surrogate.problem([task_id]).parameter_space, seed)
    common: dict[str, Any] = {"name": f"task{task_id}", "output_directory": folder, "deterministic": True, "seed": seed}
    smac: Any
    if facade == "hpo":
        scenario = Scenario(space, n_trials=max(1, int(limit // b_max + 1e-9)), **common)
        smac = HyperparameterOptimizationFacade(scenario, _not_called_black_box, overwrite=True, logging_level=False)
    else:
        n_trials = get_n_trials_for_hyperband_multifidelity(limit, b_min, b_max, structure.eta, print_summary=False)
        scenario = Scenario(space, n_trials=max(1, int(n_trials)), min_budget=b_min, max_budget=b_max, **common)
        smac = MultiFidelityFacade(
            scenario,
            _not_called,
            overwrite=True,
            logging_level=False,
            intensifier=MultiFidelityFacade.get_intensifier(scenario, eta=structure.eta),
        )
    spent = ReportBudget(limit, metric="val_accuracy")
    configs: dict[str, dict[str, Any]] = {}
    lo, hi = EPOCHS
    while not spent.spent():
        info = smac.ask()
        params = {name: info.config[name] for name in HYPERPARAMETERS}
        key = repr(sorted(params.items()))
        epoch = int(min(hi, b_max, max(lo, round(b_max if info.budget is None else info.budget))))
        value = surrogate.evaluate(task_id, params, epoch)["val_accuracy"]
        spent.record(key, {"fidelity": epoch, "val_accuracy": value})
        configs[key] = params
        smac.tell(info, TrialValue(cost=100.0 - value))

    def truth(config: dict[str, Any]) -> float:
        return surrogate.evaluate(task_id, config, b_max)["val_accuracy"]

    return budget_trace(spent, configs, int(b_max), -1.0, truth)


def run_lcbench_smac(
    surrogate: LCBenchSurrogate,
    task_ids: Sequence[int],
    structure: BanditStructure,
    budget: float,
    seed: int,
    facade: Facade = "multi_fidelity",
) -> list[Trace]:
    """SMAC3's ``MultiFidelityFacade`` (Hyperband) per task, stopped at ``budget`` (epochs / ``b_max``).

    See the module docstring for the brackets, the accounting, the answer
    and an example. Raises ``ImportError`` without smac.

    Args:
        surrogate: the LCBench surrogate that answers the trials.
        task_ids: the LCBench task ids to tune, one SMAC run and one trace each.
        structure: the bandit structure, in epochs (SMAC's budgets and ``η``).
        budget: the normalised cost per task to spend.
        seed: the runs' seed (task ``j`` gets ``seed * 1000 + j``).
        facade: ``"multi_fidelity"`` (default), or ``"hpo"``: SMAC3's ``HyperparameterOptimizationFacade``
            (random forest, black box) with ``⌊budget⌋`` trials at ``b_max``.
    """
    try:
        import smac  # noqa: F401
    except ImportError as exc:
        raise ImportError("the band benchmark's SMAC peer needs smac>=2.4: pip install 'raytuner[bench]'") from exc
    limit = budget * structure.b_max
    traces = []
    with tempfile.TemporaryDirectory(prefix="raytuner_smac_") as folder, _quiet_smac():
        for j, task_id in enumerate(task_ids):
            traces.append(
                _one_task(surrogate, task_id, structure, limit, seed * 1000 + j, Path(folder) / str(j), facade)
            )
            if traces[-1].note:
                log.warning("SMAC on task %s: %s", task_id, traces[-1].note)
    return traces
