"""Whether a task's suggestions come from the shared model or from the task's own: the leave-one-out check.

A multitask model helps a task only where what the other tasks teach holds
for it. A task whose best region lies elsewhere than the others' is
predicted badly by a model that shares their trends, and a search guided by
it never goes where that task's own data point. The check asks, per task and
per suggestion, which model predicts the task's own evaluations better when
each is held out in turn (the closed-form leave-one-out of
:meth:`~raytuner.models.FittedLCM.leave_one_out`, both models with the
hyperparameters fitted to all the data): the shared LCM over every task, or
an LCM of the task's own data alone (for GPTuneBand, of its own fidelity
levels). The score is the mean leave-one-out log predictive density of the
task's evaluations in model units, a proper score: it rewards a model that
ranks them right and knows how sure it is, and punishes one that is sure
and wrong. The model that scores higher guides the task's next suggestion.

The check sees only where the task has been evaluated; a best region that
none of its evaluations has touched yet is invisible to it, and the shared
model, sure of what the other tasks say there, would not send the task
looking. So, besides, every :attr:`MLA.OWN_TURN <raytuner.engines.MLA.OWN_TURN>`-th
suggestion of a task comes from its own model whatever the check says: the
task keeps a share of single-task BO's own search. GPTuneBand's samples
below ``b_max`` take those turns only where the task's own model tells its
good configurations from its bad ones unseen (:func:`loo_rank_correlation`
at least :attr:`MLA.OWN_TURN_RHO <raytuner.engines.MLA.OWN_TURN_RHO>`): a
bracket gets few samples a pass, and a model of one task's few evaluations
of a rough landscape would waste them. Its ``b_max`` samples come from the
task's own model (of its levels alone) once it holds :data:`MIN_OWN_SAMPLES`
evaluations at ``b_max``: the task's full-fidelity search is single-task
BO's. Until the task holds :data:`OWN_DESIGN` evaluations at ``b_max``,
those samples explore: each goes where the own model is least sure (its
largest predictive variance, the pending samples counted as seen), not where
it expects most. The task's first ``b_max`` evaluations are the promotions,
chosen where the low fidelities and the other tasks rate configurations
well; a search that only exploits around the best of them stays in their
region, where single-task BO's own initial design would have looked
elsewhere. A suggestion of the task's own model carries ``own_model: true``
in its provenance, an exploring one ``own_design: true`` too.

Example:
    >>> import numpy as np
    >>> from raytuner.models import LCM, LCMOptions, TrainingData
    >>> X = np.linspace(0, 1, 8)[:, None]
    >>> fitted = LCM(LCMOptions(n_starts=1)).fit(TrainingData([X], [np.sin(3 * X[:, 0])]), seed=0)
    >>> bool(loo_log_density(fitted, 0) > 0)  # a smooth curve: each point is well predicted from the rest
    True
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from raytuner.models import FittedLCM

__all__ = [
    "Sharing",
    "SHARING",
    "MIN_OWN_SAMPLES",
    "OWN_MODEL",
    "OWN_DESIGN",
    "OWN_DESIGN_NOTE",
    "loo_log_density",
    "loo_rank_correlation",
    "own_predicts_better",
]

#: How an engine chooses each suggestion's model: ``"checked"`` (the leave-one-out check of this module) or
#: ``"always"`` (the shared LCM for every task, as GPTune does).
Sharing = Literal["checked", "always"]
SHARING: tuple[str, ...] = ("checked", "always")
#: The extra provenance key of a suggestion its task's own model chose (``own_model: true``).
OWN_MODEL = "own_model"
#: The fewest successful evaluations of a task before its own model is weighed against the shared one (fewer:
#: the shared model, whose other tasks make up for them).
MIN_OWN_SAMPLES = 5
#: How many ``b_max`` evaluations a GPTuneBand task holds before its own ``b_max`` samples stop exploring: the size
#: of single-task BO's initial design (:class:`~raytuner.engines.MLA`'s default ``n_initial``).
OWN_DESIGN = 10
#: The extra provenance key of an exploring sample of a task's own model (``own_design: true``).
OWN_DESIGN_NOTE = "own_design"


def loo_log_density(fitted: FittedLCM, task: int) -> float | None:
    """The mean leave-one-out log predictive density of ``task``'s samples under ``fitted`` (model units).

    ``None`` where it cannot be told: the model is sparse (no closed-form
    leave-one-out), or the task has fewer than :data:`MIN_OWN_SAMPLES`
    samples.

    Args:
        fitted: The fitted model.
        task: The task's index in the model.
    """
    mine = fitted.task == task
    if int(mine.sum()) < MIN_OWN_SAMPLES or not fitted.exact:
        return None
    mean, variance = fitted.leave_one_out()
    v = np.maximum(variance[mine], 1e-12)
    density = -0.5 * (np.log(2 * math.pi * v) + (fitted.z[mine] - mean[mine]) ** 2 / v)
    return float(np.mean(density))


def loo_rank_correlation(fitted: FittedLCM, task: int, least: int = MIN_OWN_SAMPLES) -> float | None:
    """Spearman's rho of the leave-one-out means of ``task``'s samples under ``fitted`` against their values.

    Near 1: the model tells the task's good configurations from its bad ones
    before it sees them; near 0: the landscape is too rough for this many
    evaluations. ``None`` where it cannot be told: a sparse model, fewer than
    ``least`` samples, or values all alike.

    Args:
        fitted: The fitted model.
        task: The task's index in the model.
        least: The fewest samples to tell from (default :data:`MIN_OWN_SAMPLES`).

    >>> import numpy as np
    >>> from raytuner.models import LCM, LCMOptions, TrainingData
    >>> X = np.linspace(0, 1, 12)[:, None]
    >>> fitted = LCM(LCMOptions(n_starts=1)).fit(TrainingData([X], [(X[:, 0] - 0.3) ** 2]), seed=0)
    >>> bool(loo_rank_correlation(fitted, 0) > 0.9)
    True
    """
    from scipy.stats import spearmanr  # scipy.stats is slow to import; needed here alone

    mine = fitted.task == task
    if int(mine.sum()) < least or not fitted.exact:
        return None
    rho = float(spearmanr(fitted.leave_one_out()[0][mine], fitted.z[mine]).statistic)
    return rho if np.isfinite(rho) else None


def own_predicts_better(shared: FittedLCM, shared_task: int, own: FittedLCM, own_task: int) -> bool:
    """Whether the task's own model predicts its evaluations unseen better than the shared model does.

    Args:
        shared: The LCM over every task.
        shared_task: The task's index in ``shared``.
        own: The LCM of the task's own data.
        own_task: The task's index in ``own``.
    """
    mine, theirs = loo_log_density(own, own_task), loo_log_density(shared, shared_task)
    return mine is not None and theirs is not None and mine > theirs
