"""The LCM's hyperparameters, their bounds, and their flat vector for L-BFGS.

For ``Q`` latent functions over ``m`` tasks in ``d`` dimensions with
coregionalization rank ``r``:

- ``lengthscales`` ``(Q, d)``: ARD length scales of each latent kernel (unit-cube units; in a
  categorical column, units of one change of category);
- ``W`` ``(Q, m, r)`` and ``kappa`` ``(Q, m)``: ``B_q = W_q W_qᵀ + diag(κ_q)``;
- ``noise`` ``(m,)``: per-task noise variance, in standardised output units.

Positive quantities are optimised as logarithms; ``W`` as it is.

Example:
    >>> import numpy as np
    >>> hp = Hyperparameters.initial(latent=2, tasks=3, dimension=1, rank=1)
    >>> vector = hp.to_vector()
    >>> vector.shape
    (17,)
    >>> back = Hyperparameters.from_vector(vector, latent=2, tasks=3, dimension=1, rank=1)
    >>> bool(np.allclose(back.to_vector(), vector))
    True
    >>> Hyperparameters.from_dict(hp.to_dict()) == hp
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raytuner.errors import InvalidInputError

__all__ = ["Hyperparameters", "BOUNDS"]

#: Box bounds of the optimisation (natural units; logs are taken for positive ones). Nonnegative task
#: weights bound ``W`` below at 0 instead (:meth:`Hyperparameters.vector_bounds`).
BOUNDS: dict[str, tuple[float, float]] = {
    "lengthscales": (1e-3, 1e2),
    "W": (-10.0, 10.0),
    "kappa": (1e-8, 10.0),
    "noise": (1e-8, 10.0),
}


@dataclass
class Hyperparameters:
    """One LCM's hyperparameters (see the module docstring for shapes)."""

    lengthscales: np.ndarray
    W: np.ndarray
    kappa: np.ndarray
    noise: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(latent, tasks, dimension, rank)``."""
        latent, tasks, rank = self.W.shape
        return latent, tasks, self.lengthscales.shape[1], rank

    def coregionalization(self) -> np.ndarray:
        """``B`` of shape ``(Q, m, m)``: ``B_q = W_q W_qᵀ + diag(κ_q)``."""
        B = np.einsum("qir,qjr->qij", self.W, self.W)
        idx = np.arange(self.W.shape[1])
        B[:, idx, idx] += self.kappa
        return B

    def prior_variances(self) -> np.ndarray:
        """Each task's prior variance ``Σ_q B_q[i, i]`` (the latent kernels have unit variance)."""
        return self.coregionalization().sum(axis=0).diagonal().copy()

    def for_tasks(self, rows: Sequence[int]) -> Hyperparameters:
        """These hyperparameters over other tasks: task ``k`` takes the entries of this model's task ``rows[k]``.

        The length scales are shared by every task and stay as they are.

        Args:
            rows: for each new task, the index of one of this model's tasks.

        >>> hp = Hyperparameters.initial(latent=1, tasks=2, dimension=1, rank=1)
        >>> hp.for_tasks([1, 0, 1]).shape
        (1, 3, 1, 1)
        """
        index = np.asarray(rows, dtype=int)
        return Hyperparameters(
            lengthscales=self.lengthscales.copy(),
            W=self.W[:, index, :].copy(),
            kappa=self.kappa[:, index].copy(),
            noise=self.noise[index].copy(),
        )

    def to_vector(self) -> np.ndarray:
        """The flat vector L-BFGS optimises (logs of the positive parts)."""
        return np.concatenate(
            [np.log(self.lengthscales).ravel(), self.W.ravel(), np.log(self.kappa).ravel(), np.log(self.noise).ravel()]
        )

    @classmethod
    def from_vector(cls, vector: np.ndarray, latent: int, tasks: int, dimension: int, rank: int) -> Hyperparameters:
        """Inverse of :meth:`to_vector`.

        Args:
            vector: what :meth:`to_vector` returned.
            latent: the number of latent functions Q.
            tasks: the number of tasks.
            dimension: the number of tuning parameters.
            rank: the rank of each coregionalisation matrix.
        """
        sizes = [latent * dimension, latent * tasks * rank, latent * tasks, tasks]
        if len(vector) != sum(sizes):
            raise InvalidInputError(
                "hyperparameters",
                f"a vector of length {len(vector)} does not fit "
                f"{latent} latent functions over {tasks} tasks in "
                f"{dimension} dimensions with rank {rank}",
            )
        parts = np.split(np.asarray(vector, dtype=float), np.cumsum(sizes)[:-1])
        return cls(
            lengthscales=np.exp(parts[0]).reshape(latent, dimension),
            W=parts[1].reshape(latent, tasks, rank).copy(),
            kappa=np.exp(parts[2]).reshape(latent, tasks),
            noise=np.exp(parts[3]),
        )

    @staticmethod
    def vector_bounds(
        latent: int, tasks: int, dimension: int, rank: int, nonnegative: bool = False
    ) -> list[tuple[float, float]]:
        """L-BFGS-B bounds matching :meth:`to_vector`.

        Args:
            latent: the number of latent functions Q.
            tasks: the number of tasks.
            dimension: the number of tuning parameters.
            rank: the rank of each coregionalisation matrix.
            nonnegative: ``W``'s entries are bounded below at 0 (default: ``BOUNDS["W"]``).
        """

        def logs(name: str) -> tuple[float, float]:
            low, high = BOUNDS[name]
            return math.log(low), math.log(high)

        weights = (0.0, BOUNDS["W"][1]) if nonnegative else BOUNDS["W"]
        return (
            [logs("lengthscales")] * (latent * dimension)
            + [weights] * (latent * tasks * rank)
            + [logs("kappa")] * (latent * tasks)
            + [logs("noise")] * tasks
        )

    @classmethod
    def initial(
        cls,
        latent: int,
        tasks: int,
        dimension: int,
        rank: int,
        rng: np.random.Generator | None = None,
        nonnegative: bool = False,
    ) -> Hyperparameters:
        """A default start, or a random one drawn from ``rng``.

        The default spreads the latent functions' length scales
        geometrically (0.5, 0.15, 0.045, ...: identical latent functions would
        be a saddle the optimiser cannot leave) and gives tasks a shared
        component plus some independence; random starts spread length scales
        log-uniformly over [0.03, 1] and draw ``W`` so that the prior
        variance of each task is near one.

        Args:
            latent: the number of latent functions Q.
            tasks: the number of tasks.
            dimension: the number of tuning parameters.
            rank: the rank of each coregionalisation matrix.
            rng: draws a random start (default: the deterministic default start).
            nonnegative: a random start's ``W`` takes the absolute values of its draws (the default start's
                are positive).
        """
        if rng is None:
            scales = 0.5 * 0.3 ** np.arange(latent)
            return cls(
                lengthscales=np.repeat(scales[:, None], dimension, axis=1),
                W=np.full((latent, tasks, rank), 1.0 / math.sqrt(2.0 * latent * rank)),
                kappa=np.full((latent, tasks), 0.5 / latent),
                noise=np.full(tasks, 1e-3),
            )
        lengthscales = np.exp(rng.uniform(math.log(0.03), math.log(1.0), (latent, dimension)))
        W = rng.normal(0.0, 1.0 / math.sqrt(latent * rank), (latent, tasks, rank))
        return cls(
            lengthscales=lengthscales,
            W=np.abs(W) if nonnegative else W,
            kappa=np.exp(rng.uniform(math.log(1e-3), math.log(0.5), (latent, tasks))),
            noise=np.exp(rng.uniform(math.log(1e-5), math.log(1e-1), tasks)),
        )

    def clipped(self, nonnegative: bool = False) -> Hyperparameters:
        """The same values pulled inside :data:`BOUNDS` (for warm starts).

        Args:
            nonnegative: also bound ``W`` below at 0. Each column ``W_q[:, r]`` whose entries sum below 0 is
                negated first (which leaves ``B_q`` as it is), then negative entries become 0.

        >>> hp = Hyperparameters.initial(latent=1, tasks=3, dimension=1, rank=1)
        >>> hp.W[0, :, 0] = [-0.5, -0.2, 0.1]
        >>> hp.clipped(nonnegative=True).W[0, :, 0].tolist()
        [0.5, 0.2, 0.0]
        """
        W = self.W
        if nonnegative:
            W = np.maximum(W * np.where(W.sum(axis=1, keepdims=True) < 0, -1.0, 1.0), 0.0)
        return Hyperparameters(
            *(
                np.clip(value, *BOUNDS[name])
                for name, value in (
                    ("lengthscales", self.lengthscales),
                    ("W", W),
                    ("kappa", self.kappa),
                    ("noise", self.noise),
                )
            )
        )

    def with_new_task(self) -> Hyperparameters:
        """The same model with one more task, whose weights start at the other tasks' mean.

        Transfer learning extends a source model by the target task this way.

        >>> hp = Hyperparameters.initial(2, 3, 1, 1).with_new_task()
        >>> hp.shape
        (2, 4, 1, 1)
        """
        return Hyperparameters(
            lengthscales=self.lengthscales.copy(),
            W=np.concatenate([self.W, self.W.mean(axis=1, keepdims=True)], axis=1),
            kappa=np.concatenate([self.kappa, self.kappa.mean(axis=1, keepdims=True)], axis=1),
            noise=np.append(self.noise, self.noise.mean()),
        )

    def fixed_except_task(self, task: int) -> np.ndarray:
        """A mask over :meth:`to_vector`: True everywhere but task ``task``'s W row, κ and noise.

        Passed as ``fixed`` to :meth:`raytuner.models.LCM.fit`, it learns one
        task's weights on top of a model fitted to the others.

        Args:
            task: the index of the task whose entries are learned.

        >>> int((~Hyperparameters.initial(2, 3, 1, 1).fixed_except_task(2)).sum())   # 2 W + 2 κ + 1 noise
        5
        """
        parts = Hyperparameters(
            np.ones_like(self.lengthscales), np.ones_like(self.W), np.ones_like(self.kappa), np.ones_like(self.noise)
        )
        parts.W[:, task, :] = 0
        parts.kappa[:, task] = 0
        parts.noise[task] = 0
        return np.concatenate([parts.lengthscales.ravel(), parts.W.ravel(), parts.kappa.ravel(), parts.noise]).astype(
            bool
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly nested lists (floats round-trip exactly through JSON)."""
        return {name: getattr(self, name).tolist() for name in ("lengthscales", "W", "kappa", "noise")}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hyperparameters:
        """Inverse of :meth:`to_dict`; a missing or malformed entry names the field.

        Args:
            data: what :meth:`to_dict` returned.
        """
        try:
            values = {name: np.asarray(data[name], dtype=float) for name in ("lengthscales", "W", "kappa", "noise")}
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                "hyperparameters",
                f"not an LCM hyperparameter set ({exc})",
                allowed=["lengthscales", "W", "kappa", "noise"],
            ) from exc
        hp = cls(**values)
        latent, tasks, rank = hp.W.shape if hp.W.ndim == 3 else (0, 0, 0)
        if (
            hp.W.ndim != 3
            or hp.lengthscales.ndim != 2
            or hp.lengthscales.shape[0] != latent
            or hp.kappa.shape != (latent, tasks)
            or hp.noise.shape != (tasks,)
        ):
            raise InvalidInputError("hyperparameters", "inconsistent shapes of lengthscales, W, kappa, noise")
        return hp

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hyperparameters):
            return NotImplemented
        return all(np.array_equal(getattr(self, n), getattr(other, n)) for n in ("lengthscales", "W", "kappa", "noise"))
