"""GPTuneBand's options, named once: :class:`GPTuneBandOptions`.

The engine (:class:`~raytuner.engines.GPTuneBand`), the Ray scheduler
(:class:`raytuner.schedulers.GPTuneBandScheduler`), the engine registry and a
stored engine spec all take these fields by these names, with these defaults; a
new option is added here alone.

Example:
    >>> from raytuner.models import LCMOptions
    >>> options = GPTuneBandOptions(b_min=1, b_max=27, passes=2, lcm=LCMOptions(n_starts=2))
    >>> options.spec_options()["passes"], options.spec_options()["lcm"]["n_starts"]
    (2, 2)
    >>> GPTuneBandOptions.given(options, budget=10.0).budget
    10.0
    >>> GPTuneBandOptions.given(None, pases=2)
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: pases: GPTuneBand has no option 'pases' (allowed: acquisition, ...)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from raytuner.engines.bandit import BanditStructure, FidelityMode, check_mode
from raytuner.engines.gptuneband.sampler import SOURCE_PROPOSALS
from raytuner.engines.sharing import SHARING, Sharing
from raytuner.engines.spec import plain_options
from raytuner.errors import InvalidInputError
from raytuner.models import LCMOptions
from raytuner.models.executors import Executor

__all__ = ["LATER_PASSES", "MODELS", "GPTuneBandOptions", "check_limits"]

#: GPTuneBand's models (the ``model`` option).
MODELS = ("paper", "levels")

#: A field's metadata key: where the field goes. ``"spec"`` (the default): an engine option, kept in the
#: engine's spec; ``"beside"``: what the engine uses but is not plain data (beside the spec);
#: ``"ray"``: how Ray's trials carry the fidelity (the scheduler's alone).
_KIND = "kind"

#: The fields GPTuneBand passes on to its samplers, which take them as MLA's options of the same names.
_SAMPLER_FIELDS = ("lcm", "acquisition", "acquisition_options", "executor", "search_candidates", "sharing")


#: How the passes after the first choose their brackets (GPTuneBand's ``later_passes`` option): every bracket, as
#: Hyperband; or the brackets whose lowest fidelity ranks evaluations as ``b_max`` does
#: (:meth:`~raytuner.engines.gptuneband.plan.BandPlan.agreement`).
LATER_PASSES = ("all", "agreeing")


def check_limits(budget: float | None, passes: int | None) -> None:
    """Refuse a budget or a pass count that is not one, naming the field.

    Args:
        budget: Normalised cost per task (``None``: no budget).
        passes: Passes of the bracket plan (``None``: one, or as many as the budget pays for).

    >>> check_limits(0, None)
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: budget: must be a number > 0 (normalised cost per task) or None, got 0
    """
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget < float("inf")
    ):
        raise InvalidInputError("budget", f"must be a number > 0 (normalised cost per task) or None, got {budget!r}")
    if passes is not None and (not isinstance(passes, int) or isinstance(passes, bool) or passes < 1):
        raise InvalidInputError("passes", f"must be an integer >= 1 or None, got {passes!r}")


@dataclass(frozen=True, kw_only=True)
class GPTuneBandOptions:
    """How GPTuneBand tunes: every option of the engine and its scheduler, each with its default.

    The engine takes them as ``GPTuneBand(problem, tasks, seed, options)`` or as
    keyword arguments of the same names (which override ``options``); the
    scheduler as ``GPTuneBandScheduler(..., structure=..., options=...)``; an
    :class:`~raytuner.engines.EngineSpec` named ``"gptuneband"`` stores
    :meth:`spec_options`. The scheduler's brackets come from its ``structure``,
    so it leaves ``b_min``, ``b_max``, ``eta`` and ``fidelities`` to it.
    Every option is given by name (0.1's scheduler options had another order).

    Example:
        >>> GPTuneBandOptions(passes=2, fidelity_mode="iterative").passes
        2
        >>> GPTuneBandOptions(model="deep")
        Traceback (most recent call last):
        ...
        raytuner.errors.InvalidInputError: model: unknown GPTuneBand model 'deep' (allowed: paper, levels)

    Attributes:
        b_min: The lowest fidelity of Hyperband's brackets (with ``b_max`` and ``eta``).
        b_max: The highest fidelity.
        eta: The halving factor.
        fidelities: A custom fidelity list ``[B(0), ..., B(s_max)]``, instead of ``b_min`` and ``b_max``.
        integer_fidelities: Round Hyperband's fidelities to integers (``None``: when ``b_min`` and
            ``b_max`` are whole numbers, so ``b_min=1, b_max=52, eta=3`` gives 52, 17, 6 and 2).
        passes: How many times the whole bracket plan runs (``None``: once, or as often as ``budget`` pays for).
        budget: Normalised cost per task (an evaluation at ``b`` costs ``b / b_max``): a task ends
            when its next step does not fit in what is left (``None``: the passes decide).
        fidelity_mode: ``"one_shot"`` (a promotion is a new evaluation at a higher fidelity) or
            ``"iterative"`` (a promotion continues training).
        n_initial: Size of each LCM-task's initial LHS design (default: the fewest samples of any bracket,
            ``min N(s)``, as GPTune's ``MB_LCM`` takes ``NS1``; half of that, at least 1, when ``source``
            gives usable records, successful and at one of the brackets' fidelities: they inform the model
            from the start). The spec keeps the number chosen, so a rebuilt engine starts the same way.
        lcm: The LCM's fitting options (``None``: the defaults).
        acquisition: The acquisition function (MLA's).
        acquisition_options: Its options (MLA's).
        objective: The objective to tune (default: every objective and output constraint where the problem
            has several, else its one objective).
        search_candidates: The size of the acquisition search's global phase (MLA's).
        model: ``"paper"``: the paper's LCM over the (task, bracket) pairs still sampling, each
            bracket's samples chosen by the prediction at its own fidelity; ``"levels"``: every
            fidelity level of every task stays in the LCM as a correlated output (no evaluation
            leaves the model, lower rungs inform the prediction at ``b_max``), and every bracket's
            samples are chosen by the prediction at ``b_max``.
        source_proposals: With sources: ``"alternate"`` (default) gives each task's model-chosen samples in
            turn to the LCM with the source tasks and to the LCM without them (paper 000's Ensemble(toggling)
            over the two; the plain one's are marked ``proposer="plain_model"``), so that sources which mislead
            about the task cannot hold its search in their region; ``"every"``: every sample from the LCM with
            the sources.
        later_passes: ``"agreeing"`` (default): from the second pass on, a bracket samples only where its
            lowest fidelity has ranked the run's evaluations as ``b_max`` does (:meth:`BandPlan.agreement
            <raytuner.engines.gptuneband.plan.BandPlan.agreement>`: the promotions of the earlier passes beside
            the evaluations they promote); bracket 0 samples in every pass. Where low fidelities rank good
            configurations badly, later passes spend their budget at ``b_max``, on the model's choices.
            ``"all"``: every bracket in every pass, as Hyperband. With several objectives, every bracket.
        sharing: ``"checked"`` (default): a sample's model is the LCM over every task unless the LCM of its
            own task's levels alone predicts that task's evaluations better (:mod:`raytuner.engines.sharing`);
            ``"always"``: the LCM over every task.
        executor: Runs the LCM's multi-start fits (``None``: inline for small fits, else Ray actors or a
            process pool); beside the spec, not in it.
        source: Evaluations to learn from besides the engine's own (the crowd's records:
            :func:`raytuner.client.crowd_sources.crowd_source`): each sampler's LCM takes the successful ones
            as tasks of their own, at the level of their fidelity (one of the brackets'; a record without one
            is at ``b_max``, as GPTune's are), as :class:`~raytuner.engines.MLA` does; ``None``: none. Beside
            the spec, not in it.
        fidelity_key: The scheduler's: the config key of a one-shot trial's fidelity.
        time_attr: The scheduler's: the result key that counts an iterative trial's fidelity.
    """

    b_min: float | None = None
    b_max: float | None = None
    eta: int | None = 3
    fidelities: Sequence[float] | None = None
    integer_fidelities: bool | None = None
    passes: int | None = None
    budget: float | None = None
    fidelity_mode: FidelityMode = "one_shot"
    n_initial: int | None = None
    lcm: LCMOptions | None = None
    acquisition: str = "ei"
    acquisition_options: Mapping[str, float] | None = None
    objective: str | None = None
    search_candidates: int = 2048
    model: str = "paper"
    source_proposals: str = "alternate"
    later_passes: str = "agreeing"
    sharing: Sharing = "checked"
    executor: Executor | None = field(default=None, metadata={_KIND: "beside"})
    source: Any = field(default=None, metadata={_KIND: "beside"})
    fidelity_key: str = field(default="fidelity", metadata={_KIND: "ray"})
    time_attr: str = field(default="training_iteration", metadata={_KIND: "ray"})

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise InvalidInputError("model", f"unknown GPTuneBand model {self.model!r}", allowed=list(MODELS))
        if self.source_proposals not in SOURCE_PROPOSALS:
            raise InvalidInputError(
                "source_proposals", f"unknown choice {self.source_proposals!r}", allowed=list(SOURCE_PROPOSALS)
            )
        if self.later_passes not in LATER_PASSES:
            raise InvalidInputError("later_passes", f"unknown choice {self.later_passes!r}", allowed=list(LATER_PASSES))
        if self.sharing not in SHARING:
            raise InvalidInputError("sharing", f"unknown sharing {self.sharing!r}", allowed=list(SHARING))
        check_mode(self.fidelity_mode)
        check_limits(self.budget, self.passes)
        if self.lcm is not None and not isinstance(self.lcm, LCMOptions):
            raise InvalidInputError("lcm", f"{self.lcm!r} is not an LCMOptions")
        if self.fidelities is not None:
            object.__setattr__(self, "fidelities", tuple(self.fidelities))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The names of the options an engine spec keeps (:meth:`spec_options`), as the registry lists them.

        >>> "passes" in GPTuneBandOptions.names(), "executor" in GPTuneBandOptions.names()
        (True, False)
        """
        return tuple(f.name for f in fields(cls) if f.metadata.get(_KIND, "spec") == "spec")

    @classmethod
    def given(cls, options: GPTuneBandOptions | None, **values: Any) -> GPTuneBandOptions:
        """``options`` (default: the defaults) with the fields named in ``values`` set; an unknown name refused.

        Args:
            options: The options to start from.
            **values: Field names and their values.

        Raises:
            InvalidInputError: A name that is no field (one line listing them), or a bad value.
        """
        if options is None:
            options = cls()
        elif not isinstance(options, GPTuneBandOptions):
            raise InvalidInputError("options", f"{options!r} is not a GPTuneBandOptions")
        every = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - every)
        if unknown:
            raise InvalidInputError(unknown[0], f"GPTuneBand has no option {unknown[0]!r}", allowed=sorted(every))
        return replace(options, **values) if values else options

    def with_structure(self, structure: BanditStructure) -> GPTuneBandOptions:
        """These options with ``structure``'s halving factor and fidelities in place of ``b_min`` and ``b_max``.

        Args:
            structure: The brackets (``BanditStructure.hyperband(1, 27, 3)``).

        Raises:
            InvalidInputError: ``structure`` is no :class:`BanditStructure`, or these options give brackets too.

        >>> GPTuneBandOptions().with_structure(BanditStructure.hyperband(1, 9, 3)).fidelities
        (9.0, 3.0, 1.0)
        """
        if not isinstance(structure, BanditStructure):
            raise InvalidInputError(
                "structure", f"{structure!r} is not a BanditStructure: e.g. BanditStructure.hyperband(1, 27, 3)"
            )
        if self.b_min is not None or self.b_max is not None or self.fidelities is not None:
            raise InvalidInputError("structure", "give either a structure or b_min, b_max and fidelities, not both")
        return replace(self, eta=structure.eta, fidelities=tuple(structure.fidelities))

    def sampler_options(self) -> dict[str, Any]:
        """The options GPTuneBand's samplers take as :class:`~raytuner.engines.MLA`'s, by MLA's names.

        >>> sorted(GPTuneBandOptions().sampler_options())
        ['acquisition', 'acquisition_options', 'executor', 'lcm', 'search_candidates', 'sharing']
        """
        return {name: getattr(self, name) for name in _SAMPLER_FIELDS}

    def spec_options(self) -> dict[str, Any]:
        """The engine options as plain data, for an :class:`~raytuner.engines.EngineSpec` (no executor, source
        or Ray keys)."""
        return plain_options({name: getattr(self, name) for name in self.names()})
