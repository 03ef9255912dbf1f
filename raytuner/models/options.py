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

from dataclasses import dataclass, field
from typing import Any, Literal

from raytuner.errors import InvalidInputError
from raytuner.models.kernels import KERNELS

__all__ = ["FitReport", "KernelName", "LCMOptions"]

KernelName = Literal["rbf", "matern32", "matern52"]


@dataclass(frozen=True)
class LCMOptions:
    """How an LCM is built and fitted.

    ``latent`` (Q) defaults to ``min(tasks, 3)``; ``rank`` is the number of
    columns of each ``W_q``. ``n_starts`` L-BFGS starts run in parallel for
    a cold fit, ``warm_starts`` for a warm one: the warm start when given
    (else a default start) and random ones; for each
    random start ``screen`` random candidates are scored and the best is
    optimised. A cold fit runs at most ``max_iterations`` L-BFGS iterations
    per start, a warm one ``warm_iterations``: in a tuning run consecutive
    fits continue one optimisation over growing data, so each needs only a
    few steps. ``timeout`` bounds the wall time of the parallel starts.

    >>> LCMOptions(kernel="cubic")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: kernel: unknown kernel 'cubic' (allowed: matern32, matern52, rbf)
    """

    latent: int | None = None
    rank: int = 1
    kernel: KernelName = "rbf"
    n_starts: int = 4
    warm_starts: int = 2
    max_iterations: int = 1000
    warm_iterations: int = 100
    screen: int = 8
    log_transform: bool = False
    timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise InvalidInputError("kernel", f"unknown kernel {self.kernel!r}", allowed=sorted(KERNELS))
        for name, low in (("rank", 1), ("n_starts", 1), ("warm_starts", 1), ("max_iterations", 1),
                          ("warm_iterations", 1),
                          ("screen", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise InvalidInputError(name, f"must be an integer >= {low}, got {value!r}")
        if self.latent is not None and (not isinstance(self.latent, int) or self.latent < 1):
            raise InvalidInputError("latent", f"must be an integer >= 1 or None, got {self.latent!r}")
        if not self.timeout > 0:
            raise InvalidInputError("timeout", f"must be positive, got {self.timeout!r}")

    def latent_for(self, tasks: int) -> int:
        """The number of latent functions for ``tasks`` tasks.

        Args:
            tasks: how many tasks the model covers.
        """
        return self.latent or min(tasks, 3)

    def to_dict(self) -> dict[str, Any]:
        """The options as a JSON-friendly dict (a surrogate record's ``modeling_options``)."""
        return {"latent": self.latent, "rank": self.rank, "kernel": self.kernel, "n_starts": self.n_starts,
                "warm_starts": self.warm_starts,
                "max_iterations": self.max_iterations,
                "warm_iterations": self.warm_iterations, "screen": self.screen,
                "log_transform": self.log_transform, "timeout": self.timeout}


@dataclass
class FitReport:
    """What a fit did: per-start values and iterations, and the wall time."""

    starts: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    iterations: int = 0
    evaluations: int = 0
