"""Bandit structures: Hyperband's brackets, their fidelities and successive-halving rungs.

A structure is the fidelity of each bracket, ``B(0) = b_max > B(1) > ... >
B(s_max)``, and the halving factor ``η``. Bracket ``s`` starts ``N(s) =
⌊(s_max + 1)/(s + 1)⌋ η^s`` configurations at ``B(s)``; successive halving
keeps the best ``⌊|C|/η⌋`` of each rung and evaluates them at the next
fidelity, up to ``b_max`` (paper 004, Algorithms 2 to 4).

Example (the paper's Figure 1):
    >>> band = BanditStructure.hyperband(b_min=1, b_max=27, eta=3)
    >>> band.fidelities, [band.samples(s) for s in range(band.s_max + 1)]
    ((27.0, 9.0, 3.0, 1.0), [4, 6, 9, 27])
    >>> band.rungs(3)
    [(27, 1.0), (9, 3.0), (3, 9.0), (1, 27.0)]
    >>> band.cost_per_pass()    # normalised cost per task, one-shot fidelity
    15.0
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from raytuner.errors import InvalidInputError

__all__ = ["BanditStructure", "FidelityMode", "FIDELITY_MODES"]

log = logging.getLogger(__name__)

#: ``"one_shot"``: a promotion is a new evaluation at the higher fidelity (HPC codes: grid size,
#: time steps). ``"iterative"``: a promotion continues training from a checkpoint.
FidelityMode = Literal["one_shot", "iterative"]
FIDELITY_MODES: tuple[str, ...] = ("one_shot", "iterative")


@dataclass(frozen=True)
class BanditStructure:
    """The fidelity ``B(s)`` of every bracket ``s`` (strictly decreasing) and the halving factor ``eta``."""

    fidelities: tuple[float, ...]
    eta: int

    def __post_init__(self) -> None:
        if not isinstance(self.eta, int) or isinstance(self.eta, bool) or self.eta < 2:
            raise InvalidInputError("eta", f"must be an integer >= 2, got {self.eta!r}")
        values = tuple(float(b) for b in self.fidelities)
        if not values:
            raise InvalidInputError("fidelities", "at least one fidelity is needed")
        if any(not math.isfinite(b) or b <= 0 for b in values):
            raise InvalidInputError("fidelities", f"every fidelity must be finite and > 0, got {list(values)}")
        if any(b <= c for b, c in zip(values, values[1:])):
            raise InvalidInputError("fidelities", f"must decrease strictly from b_max, got {list(values)}")
        object.__setattr__(self, "fidelities", values)

    @classmethod
    def hyperband(cls, b_min: float, b_max: float, eta: int, *, integer: bool = False) -> BanditStructure:
        """Hyperband's setup: ``s_max = ⌊log_η(b_max/b_min)⌋`` and ``B(s) = b_max η^-s``.

        ``integer=True`` rounds each fidelity to the nearest integer (epochs,
        iterations), dropping repeats.

        Args:
            b_min: The lowest fidelity.
            b_max: The highest fidelity.
            eta: The halving factor (an integer >= 2).
            integer: Round each fidelity to the nearest integer.

        >>> BanditStructure.hyperband(1, 52, 3, integer=True).fidelities
        (52.0, 17.0, 6.0, 2.0)
        """
        for name, value in (("b_min", b_min), ("b_max", b_max)):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise InvalidInputError(name, f"must be a finite number > 0, got {value!r}")
        if b_max < b_min:
            raise InvalidInputError("b_max", f"must be >= b_min = {b_min}, got {b_max}")
        if not isinstance(eta, int) or isinstance(eta, bool) or eta < 2:
            raise InvalidInputError("eta", f"must be an integer >= 2, got {eta!r}")
        s_max = 0
        while b_min * eta ** (s_max + 1) <= b_max * (1 + 1e-9):
            s_max += 1
        values = [b_max * float(eta) ** -s for s in range(s_max + 1)]
        if integer:
            values = sorted({float(max(1, round(b))) for b in values}, reverse=True)
        return cls(tuple(values), eta)

    @property
    def s_max(self) -> int:
        """The last bracket (brackets are ``0 .. s_max``)."""
        return len(self.fidelities) - 1

    @property
    def b_max(self) -> float:
        """The highest fidelity, ``B(0)``."""
        return self.fidelities[0]

    def fidelity(self, s: int) -> float:
        """``B(s)``.

        Args:
            s: The bracket.
        """
        return self.fidelities[s]

    def samples(self, s: int) -> int:
        """``N(s) = ⌊(s_max + 1)/(s + 1)⌋ η^s``, the configurations bracket ``s`` starts with.

        Args:
            s: The bracket.
        """
        return ((self.s_max + 1) // (s + 1)) * self.eta**s

    def keep(self, count: int) -> int:
        """How many of ``count`` evaluations successive halving promotes: ``⌊count/η⌋`` (at least 1).

        Args:
            count: How many evaluations the rung holds.
        """
        return max(1, count // self.eta)

    def rungs(self, s: int) -> list[tuple[int, float]]:
        """``(evaluations, fidelity)`` of each rung of bracket ``s``, from ``B(s)`` up to ``b_max``.

        Args:
            s: The bracket.
        """
        out = [(self.samples(s), self.fidelity(s))]
        for level in range(s - 1, -1, -1):
            out.append((self.keep(out[-1][0]), self.fidelity(level)))
        return out

    def cost(self, fidelity: float, previous: float | None = None, mode: FidelityMode = "one_shot") -> float:
        """Normalised cost of an evaluation at ``fidelity`` (``b / b_max``).

        In ``"iterative"`` mode a promotion from ``previous`` pays only the
        increment, ``(b - previous) / b_max``.

        Args:
            fidelity: The evaluation's fidelity.
            previous: The fidelity it continues from (a promotion; ``None``: none).
            mode: ``"one_shot"`` or ``"iterative"``.
        """
        start = previous if (mode == "iterative" and previous is not None) else 0.0
        return (fidelity - start) / self.b_max

    def cost_per_pass(self, mode: FidelityMode = "one_shot") -> float:
        """The normalised cost one pass spends on one task (every rung of every bracket).

        Args:
            mode: ``"one_shot"`` or ``"iterative"``.
        """
        total = 0.0
        for s in range(self.s_max + 1):
            previous: float | None = None
            for n, b in self.rungs(s):
                total += n * self.cost(b, previous, mode)
                previous = b
        return total

    def lcm_task_count(self, tasks: int) -> int:
        """LCM-tasks of the first LCM: ``tasks × (s_max + 1)``.

        Args:
            tasks: The number of tasks.
        """
        return tasks * (self.s_max + 1)

    def describe(self) -> list[dict[str, object]]:
        """One row per bracket: ``s``, ``B(s)``, ``N(s)`` and the rungs, for reports."""
        return [
            {"bracket": s, "fidelity": self.fidelity(s), "samples": self.samples(s), "rungs": self.rungs(s)}
            for s in range(self.s_max + 1)
        ]


def check_mode(mode: str) -> FidelityMode:
    """``mode`` if it is a fidelity mode, else an error naming the allowed ones."""
    if mode not in FIDELITY_MODES:
        raise InvalidInputError("fidelity_mode", f"unknown mode {mode!r}", allowed=FIDELITY_MODES)
    return mode  # type: ignore[return-value]  # checked just above: one of FIDELITY_MODES


def structure_from(
    b_min: float | None,
    b_max: float | None,
    eta: int | None,
    fidelities: Sequence[float] | None,
    integer: bool | None = None,
) -> BanditStructure:
    """A structure from either ``(b_min, b_max, eta)`` or ``(fidelities, eta)``; naming what is missing.

    ``integer=None`` rounds Hyperband's fidelities to whole numbers when
    ``b_min`` and ``b_max`` are whole numbers (epochs, iterations, grid
    sizes), and says at INFO when the fidelities stay fractional.

    Args:
        b_min: The lowest fidelity.
        b_max: The highest fidelity.
        eta: The halving factor.
        fidelities: A custom fidelity list instead of ``b_min`` and ``b_max``.
        integer: Round Hyperband's fidelities (``None``: when ``b_min`` and ``b_max`` are whole numbers).

    >>> structure_from(1, 52, 3, None).fidelities
    (52.0, 17.0, 6.0, 2.0)
    >>> structure_from(1, 52, 3, None, integer=False).fidelities[1]
    17.333333333333332
    """
    if eta is None:
        raise InvalidInputError("eta", "the halving factor is required")
    if fidelities is not None:
        if b_min is not None or b_max is not None:
            raise InvalidInputError("fidelities", "give either fidelities or b_min and b_max, not both")
        return BanditStructure(tuple(fidelities), eta)
    if b_min is None or b_max is None:
        raise InvalidInputError("b_min" if b_min is None else "b_max", "required unless fidelities are given")
    if integer is not None and not isinstance(integer, bool):
        raise InvalidInputError("integer_fidelities", f"must be true, false or none, got {integer!r}")
    whole = all(
        isinstance(b, (int, float)) and not isinstance(b, bool) and float(b).is_integer() for b in (b_min, b_max)
    )
    structure = BanditStructure.hyperband(b_min, b_max, eta, integer=whole if integer is None else integer)
    if any(not b.is_integer() for b in structure.fidelities):
        log.info(
            "Hyperband's fidelities %s are fractional%s",
            [round(b, 4) for b in structure.fidelities],
            "" if not whole else " (integer_fidelities=False); integer_fidelities=True rounds them",
        )
    return structure
