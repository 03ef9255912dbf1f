"""How an LCM is built and fitted (:class:`LCMOptions`) and what a fit did (:class:`FitReport`).

Both the fitting code (:mod:`raytuner.models.lcm`) and the fitted model
(:mod:`raytuner.models.fitted`) use these plain values, so they live below
both.

Example:
    >>> from raytuner.models.options import FitReport, LCMOptions
    >>> LCMOptions(n_starts=2).latent_for(5)
    3
    >>> FitReport().iterations
    0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from numbers import Integral, Real
from typing import Any, Literal

from raytuner.errors import InvalidInputError
from raytuner.models.kernels import KERNELS
from raytuner.problem.parameters import Categorical
from raytuner.problem.space import Space

__all__ = [
    "FitReport",
    "KernelName",
    "LCMOptions",
    "TASK_WEIGHTS",
    "TaskWeights",
    "NOISE_PRIOR",
    "SPACING_PRIOR_SD",
    "GPTUNE_LCM",
    "UNSTORED_OPTIONS",
]

KernelName = Literal["rbf", "matern32", "matern52"]
TaskWeights = Literal["signed", "nonnegative"]
#: The allowed values of :attr:`LCMOptions.task_weights`.
TASK_WEIGHTS: tuple[str, ...] = ("signed", "nonnegative")

#: The sd of the ``"spacing"`` length-scale prior on each log length scale.
SPACING_PRIOR_SD = 1.0
#: The default ``(shape, rate)`` of the gamma prior on each task's standardised noise variance.
NOISE_PRIOR = (1.1, 30.0)
#: The options that make GPTune's model of :class:`LCMOptions`' defaults: RBF, maximum likelihood
#: (``LCMOptions(**GPTUNE_LCM)``; what GPy fits, and what GPTune's ``Model_LCM`` reads).
GPTUNE_LCM: dict[str, Any] = {
    "kernel": "rbf",
    "lengthscale_prior": None,
    "noise_prior": None,
    "task_weights": "signed",
    "centre": False,
    "categorical": (),
}
#: The options of a model stored before its options named them: it was fitted without the priors, with
#: signed task weights.
UNSTORED_OPTIONS: dict[str, Any] = {"lengthscale_prior": None, "noise_prior": None, "task_weights": "signed"}
#: The fields :meth:`LCMOptions.to_dict` has written since engine specs store options (b8cd8f4): an engine
#: spec's options dict with all of them was stored by one.
_ALWAYS_STORED = frozenset(
    {
        "latent",
        "rank",
        "kernel",
        "n_starts",
        "warm_starts",
        "max_iterations",
        "warm_iterations",
        "screen",
        "log_transform",
        "timeout",
    }
)


@dataclass(frozen=True)
class LCMOptions:
    """How an LCM is built and fitted.

    ``latent`` (Q) defaults to ``min(tasks, 3)``; ``rank`` is the number of
    columns of each ``W_q``. ``n_starts`` L-BFGS starts run (in parallel, unless inline) for
    a cold fit, ``warm_starts`` for a warm one: the warm start when given
    (else a default start) and random ones; for each
    random start ``screen`` random candidates are scored and the best is
    optimised. A cold fit runs at most ``max_iterations`` L-BFGS iterations
    per start, a warm one ``warm_iterations``: in a tuning run consecutive
    fits continue one optimisation over growing data, so each needs only a
    few steps. ``timeout`` bounds the wall time of a fit in every executor:
    each start stops its optimiser at the deadline and keeps the best
    hyperparameters it found (the fit report's ``timed_out`` says so).

    Size: the hyperparameters are
    fitted on at most ``fit_limit`` samples, as many per task as possible
    (the others are held out, and the fit report gives the model's accuracy
    on them); past ``exact_limit`` samples the posterior is FITC whose
    inducing inputs are the samples the hyperparameters were fitted on. ``None`` lifts a limit. An engine
    re-optimises warm hyperparameters only when its data grew by
    ``refit_growth`` (a fraction) since the model it warm-starts from, and
    otherwise conditions the new data on them.
    ``lengthscale_prior`` is a normal prior on each log length scale, against
    spiky fits that interpolate with very short length scales: ``(mean, sd)``,
    or ``"spacing"`` (the default), centred on the log of the samples' spacing
    ``n ** (-1 / d)`` for ``n`` samples per task in ``d`` dimensions with sd
    :data:`SPACING_PRIOR_SD`, so it allows the short length scales dense data
    can resolve and favours longer ones where the data is sparse; ``None`` is
    maximum likelihood. ``noise_prior`` is ``(shape, rate)`` of a gamma prior
    on each task's noise variance in standardised units (default
    :data:`NOISE_PRIOR`, Optuna's GPSampler's: mean 0.037, mode 0.0033; its
    density is added as it is, without the Jacobian of the log-variance
    coordinates the fit moves in, as Optuna does), against fits that explain
    the data as noise (``None``: none). A fit's ``starts`` values (its report)
    are then the negative log-likelihood plus the priors' negative log
    densities (without their constants); ``log_likelihood`` stays the
    likelihood alone. GPTune's model (the RBF kernel, maximum likelihood) stays
    available as ``LCMOptions(**GPTUNE_LCM)``; ``python -m benchmarks mla``
    compares them. The length-scale prior alone lets a fit explain a needle
    as noise, which the noise prior prevents.
    ``task_weights`` bounds the mixing weights ``W``: ``"signed"`` (GPTune's)
    lets tasks be related with either sign; ``"nonnegative"`` keeps every
    ``W`` entry at 0 or above, so that no two tasks are modelled as
    anticorrelated (each ``B_q`` has no negative entry); ``None`` (the
    default) leaves the choice to the engine: single-objective
    :class:`~raytuner.engines.MLA` fits nonnegative weights, GPTuneBand,
    TLA2, multi-objective MLA and an LCM alone signed ones.
    With a few samples per task a signed fit often explains them by spurious
    negative correlations (``python -m benchmarks mla``'s model accuracy). A
    model of one task is the same either way, and is fitted as signed.
    ``categorical`` lists the input columns compared by category (0 between
    equal values, 1 between different ones: :func:`~raytuner.models.kernels.squared_distances`)
    rather than by position on ``[0, 1]``; ``None`` leaves the choice to
    :meth:`over`, which an engine calls with its space (every categorical
    parameter but those of numbers in order), and means none to the LCM
    alone. A stored model keeps the columns it was fitted with: one stored
    before the option existed compares every column by position, as it was
    fitted, and an engine asked for no columns adopts a stored model's.
    ``centre`` subtracts each task's mean from its outputs before they are
    scaled (the default); ``False`` keeps a prior mean of zero and only
    scales each task's outputs by their root mean square, as GPTune's
    ``Model_LCM`` conditions on raw outputs with a zero mean: a stored model
    fitted so means the same model in GPTune
    (:func:`~raytuner.models.persistence.surrogate_record`).

    >>> LCMOptions(kernel="cubic")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: kernel: unknown kernel 'cubic' (allowed: matern32, matern52, rbf)
    """

    latent: int | None = None
    rank: int = 1
    kernel: KernelName = "matern52"
    n_starts: int = 4
    warm_starts: int = 2
    max_iterations: int = 200
    warm_iterations: int = 100
    screen: int = 8
    log_transform: bool = False
    timeout: float = 120.0
    fit_limit: int | None = 500
    exact_limit: int | None = 1500
    refit_growth: float = 0.1
    lengthscale_prior: tuple[float, float] | Literal["spacing"] | None = "spacing"
    noise_prior: tuple[float, float] | None = NOISE_PRIOR
    categorical: tuple[int, ...] | None = None
    task_weights: TaskWeights | None = None
    centre: bool = True

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise InvalidInputError("kernel", f"unknown kernel {self.kernel!r}", allowed=sorted(KERNELS))
        for name, low in (
            ("rank", 1),
            ("n_starts", 1),
            ("warm_starts", 1),
            ("max_iterations", 1),
            ("warm_iterations", 1),
            ("screen", 1),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise InvalidInputError(name, f"must be an integer >= {low}, got {value!r}")
        if self.task_weights is not None and self.task_weights not in TASK_WEIGHTS:
            raise InvalidInputError(
                "task_weights", f"unknown task weights {self.task_weights!r}", allowed=list(TASK_WEIGHTS)
            )
        if not isinstance(self.centre, bool):
            raise InvalidInputError("centre", f"must be true or false, got {self.centre!r}", allowed=[True, False])
        if self.latent is not None and (not isinstance(self.latent, int) or self.latent < 1):
            raise InvalidInputError("latent", f"must be an integer >= 1 or None, got {self.latent!r}")
        if not self.timeout > 0:
            raise InvalidInputError("timeout", f"must be positive, got {self.timeout!r}")
        for name in ("fit_limit", "exact_limit"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 10):
                raise InvalidInputError(name, f"must be an integer >= 10 or None, got {value!r}")
        if not (isinstance(self.refit_growth, (int, float)) and 0 <= self.refit_growth <= 10):
            raise InvalidInputError("refit_growth", f"must be a number in [0, 10], got {self.refit_growth!r}")
        if not (isinstance(self.lengthscale_prior, str) and self.lengthscale_prior == "spacing"):
            object.__setattr__(
                self,
                "lengthscale_prior",
                _pair("lengthscale_prior", self.lengthscale_prior, "(mean, sd) with sd > 0, 'spacing'", (False, True)),
            )
        object.__setattr__(
            self,
            "noise_prior",
            _pair("noise_prior", self.noise_prior, "(shape, rate) with shape > 0 and rate > 0", (True, True)),
        )
        if self.categorical is not None:
            columns = self.categorical
            if not isinstance(columns, (tuple, list)) or not all(
                isinstance(c, Integral) and not isinstance(c, bool) and c >= 0 for c in columns
            ):
                raise InvalidInputError(
                    "categorical", f"must be a list of column indices >= 0 or None, got {columns!r}"
                )
            object.__setattr__(self, "categorical", tuple(sorted({int(c) for c in columns})))

    def weighted(self, task_weights: TaskWeights | None) -> LCMOptions:
        """These options with ``task_weights`` where they leave the choice to the engine (``None``).

        Args:
            task_weights: the engine's choice.

        >>> LCMOptions().weighted("nonnegative").task_weights
        'nonnegative'
        >>> LCMOptions(task_weights="signed").weighted("nonnegative").task_weights
        'signed'
        """
        return self if self.task_weights is not None else replace(self, task_weights=task_weights)

    def nonnegative(self, tasks: int) -> bool:
        """Whether a model of ``tasks`` tasks keeps its weights ``W`` at 0 or above (``task_weights``).

        Args:
            tasks: how many tasks the model covers.

        >>> options = LCMOptions(task_weights="nonnegative")
        >>> options.nonnegative(2), options.nonnegative(1)
        (True, False)
        """
        return self.task_weights == "nonnegative" and tasks > 1

    @property
    def categorical_columns(self) -> tuple[int, ...]:
        """The columns compared by category (none when :attr:`categorical` is ``None``)."""
        return self.categorical or ()

    def over(self, space: Space) -> LCMOptions:
        """These options for a model over ``space``'s columns: ``categorical`` its unordered categoricals when unset.

        A categorical parameter whose categories are numbers in increasing or
        decreasing order (Kernel Tuner's ``[1, 2, 4, 8]``) is an ordinal:
        compared by position, its neighbours alike. The others are compared
        by category.

        Args:
            space: the space the model's inputs encode (parameters, or tasks for TLA1).

        >>> from raytuner.problem.space import Space
        >>> space = Space.model_validate([{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1},
        ...                               {"name": "alg", "type": "categorical", "categories": ["lu", "qr", "svd"]}])
        >>> LCMOptions().over(space).categorical, LCMOptions(categorical=[]).over(space).categorical
        ((1,), ())
        >>> tiles = Space.model_validate([{"name": "tile", "type": "categorical", "categories": [1, 2, 4, 8]}])
        >>> LCMOptions().over(tiles).categorical, LCMOptions(categorical=[0]).over(tiles).categorical
        ((), (0,))
        """
        named = tuple(i for i, p in enumerate(space) if p.type == "categorical")
        if self.categorical is None:
            unordered = tuple(i for i, p in enumerate(space) if isinstance(p, Categorical) and not p.ordered)
            return replace(self, categorical=unordered)
        wrong = [c for c in self.categorical if c not in named]
        if wrong:
            raise InvalidInputError(
                "categorical", f"columns {wrong} are not categorical parameters of the space", allowed=list(named)
            )
        return self

    def lengthscale_prior_for(self, samples_per_task: float, dimension: int) -> tuple[float, float] | None:
        """The ``(mean, sd)`` of the length-scale prior for a fit on this many samples per task, or ``None``.

        Args:
            samples_per_task: how many samples each task has on average.
            dimension: how many input columns the kernel has.

        >>> LCMOptions().lengthscale_prior_for(100, 2), LCMOptions(lengthscale_prior=(0, 2)).lengthscale_prior_for(9, 1)
        ((-2.302585092994046, 1.0), (0.0, 2.0))
        """
        if self.lengthscale_prior == "spacing":
            return -math.log(max(samples_per_task, 1.0)) / max(dimension, 1), SPACING_PRIOR_SD
        return self.lengthscale_prior

    @property
    def inducing(self) -> int:
        """How many inducing inputs a sparse posterior has: ``fit_limit`` (else ``exact_limit``)."""
        return int(self.fit_limit or self.exact_limit or 0)

    def sparse(self, samples: int) -> bool:
        """Whether a model of ``samples`` samples has the FITC posterior (past ``exact_limit``).

        Args:
            samples: how many samples the model has.

        >>> LCMOptions(exact_limit=100).sparse(101), LCMOptions(exact_limit=None).sparse(10**6)
        (True, False)
        """
        return self.exact_limit is not None and samples > self.exact_limit

    def latent_for(self, tasks: int) -> int:
        """The number of latent functions for ``tasks`` tasks.

        Args:
            tasks: how many tasks the model covers.
        """
        return self.latent or min(tasks, 3)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LCMOptions:
        """Options from plain data: an engine spec's stored :meth:`to_dict`, or some fields a user wrote.

        A dict holding every field that ``to_dict`` has written since engine
        specs store options was stored by it. A prior it does not name did not
        exist then, so the model had none: it is ``None``
        (:data:`UNSTORED_OPTIONS`), not today's default; its task weights were signed. Any other dict
        (options a user gave, stored as given) takes today's defaults for the
        fields it leaves out, as does a stored dict for fields added since.

        Args:
            data: field names and plain values (priors as lists).

        Raises:
            TypeError: a field :class:`LCMOptions` does not have.
            raytuner.errors.InvalidInputError: a bad value.

        >>> stored = {k: v for k, v in LCMOptions(kernel="rbf").to_dict().items() if not k.endswith("_prior")}
        >>> LCMOptions.from_dict(stored).noise_prior is None
        True
        >>> LCMOptions.from_dict({"kernel": "rbf"}).noise_prior
        (1.1, 30.0)
        """
        stored = _ALWAYS_STORED <= data.keys()
        return cls(**{**(UNSTORED_OPTIONS if stored else {}), **data})

    def to_dict(self) -> dict[str, Any]:
        """The options as a JSON-friendly dict (a surrogate record's ``modeling_options``)."""
        return {
            "latent": self.latent,
            "rank": self.rank,
            "kernel": self.kernel,
            "n_starts": self.n_starts,
            "warm_starts": self.warm_starts,
            "max_iterations": self.max_iterations,
            "warm_iterations": self.warm_iterations,
            "screen": self.screen,
            "log_transform": self.log_transform,
            "timeout": self.timeout,
            "fit_limit": self.fit_limit,
            "exact_limit": self.exact_limit,
            "refit_growth": self.refit_growth,
            "lengthscale_prior": _listed(self.lengthscale_prior),
            "noise_prior": _listed(self.noise_prior),
            "categorical": None if self.categorical is None else list(self.categorical),
            "task_weights": self.task_weights,
            "centre": self.centre,
        }


def _pair(name: str, value: Any, allowed: str, positive: tuple[bool, bool]) -> tuple[float, float] | None:
    """``value`` as a pair of finite floats, positive where ``positive`` says, or ``None``; else an error."""
    if value is None:
        return None
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or not all(isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v) for v in value)
        or any(must and not v > 0 for v, must in zip(value, positive))
    ):
        raise InvalidInputError(name, f"must be {allowed} or None, got {value!r}")
    return float(value[0]), float(value[1])


def _listed(value: Any) -> Any:
    """A tuple option as a JSON list; anything else as it is."""
    return list(value) if isinstance(value, tuple) else value


@dataclass
class FitReport:
    """What a fit did: per-start values and iterations, the wall time, and any approximation.

    ``optimised`` is False when the hyperparameters were reused without
    optimisation (the data had not grown by ``refit_growth``);
    ``optimised_samples`` is how many samples they were last optimised on.
    ``approximation`` is ``None`` for an exact fit on every sample, else a
    dict: ``method`` (``"subset"``: hyperparameters fitted on a subset,
    exact posterior; ``"fitc"``: also a sparse posterior), ``samples``,
    ``fit_samples``, ``inducing`` (or ``None``), and the accuracy on
    ``held_out`` samples left out of the fit: ``held_out_rmse`` and
    ``held_out_log_density`` (mean log predictive density), in model units.
    ``executor`` names the executor the fit used, named by its caller or
    chosen by size (``"InlineExecutor"``, ``"RayExecutor"``, ...; ``None``
    when nothing was optimised).
    """

    starts: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    iterations: int = 0
    evaluations: int = 0
    optimised: bool = True
    optimised_samples: int | None = None
    approximation: dict[str, Any] | None = None
    timed_out: bool = False
    executor: str | None = None
