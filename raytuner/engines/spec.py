"""What an engine is built from: its registered name and its options, as plain JSON-able data.

An :class:`EngineSpec` is what a face stores or sends to build an engine
again (:func:`raytuner.engines.build_engine`); every engine reports its
own (:attr:`raytuner.engines.Engine.spec`). Options are plain data:
an option object that has a ``to_dict()`` (``LCMOptions``, LCM
``Hyperparameters``) is kept as that dict, tuples become lists. What an
engine uses but is not an option, its executor and its source data, is
passed beside the spec, never in it.

Example:
    >>> from raytuner.models import LCMOptions
    >>> spec = EngineSpec("mla", {"n_initial": 4, "lcm": LCMOptions(n_starts=2)})
    >>> spec.options["lcm"]["n_starts"], EngineSpec.from_dict(spec.to_dict()) == spec
    (2, True)
    >>> EngineSpec("mla", {"executor": object()})
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: options.executor: object is not plain data (an executor or source data goes beside the spec, not in its options)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytuner.errors import InvalidInputError

__all__ = ["EngineSpec", "FORMER_NAMES", "plain_options"]


def _plain(value: Any, where: str) -> Any:
    """``value`` as JSON-able data, or an error naming ``where``."""
    if isinstance(value, np.generic):
        return _plain(value.item(), where)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        return _plain(value.tolist(), where)
    if isinstance(value, Mapping):
        return {str(k): _plain(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _plain(to_dict(), where)
    raise InvalidInputError(
        where,
        f"{type(value).__name__} is not plain data (an executor or source data goes "
        f"beside the spec, not in its options)",
    )


def plain_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as JSON-able data (see the module docstring); an error names the option that is not.

    Args:
        options: Option names to values.

    >>> plain_options({"fidelities": (4, 2, 1), "acquisition_options": {"xi": np.float64(0.1)}})
    {'fidelities': [4, 2, 1], 'acquisition_options': {'xi': 0.1}}
    """
    if not isinstance(options, Mapping):
        raise InvalidInputError("options", f"must be an object of option names to values, got {type(options).__name__}")
    return {str(k): _plain(v, f"options.{k}") for k, v in options.items()}


#: Registry names of earlier versions, and the engine each names now (stored specs and commands still use them).
FORMER_NAMES: dict[str, str] = {"band": "gptuneband", "tla": "transfer"}


@dataclass(frozen=True)
class EngineSpec:
    """An engine's registered name and the options it is built with (plain data).

    Args:
        name: The name the registry builds the engine by (``"mla"``, ``"gptuneband"``,
            ``"transfer"``, ...; :data:`raytuner.engines.ENGINES` lists them), which
            is also the name the engine writes into provenance
            (:attr:`Engine.name <raytuner.engines.Engine.name>`). Names written
            before the rename still load (:data:`FORMER_NAMES`).
        options: The engine's keyword options; made plain on construction.

    Example:
        >>> EngineSpec("band", {"eta": 3}).to_dict()
        {'name': 'gptuneband', 'options': {'eta': 3}}
    """

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise InvalidInputError("engine", f"must be a name, got {type(self.name).__name__}")
        object.__setattr__(self, "name", FORMER_NAMES.get(self.name, self.name))
        object.__setattr__(self, "options", plain_options(self.options))

    def to_dict(self) -> dict[str, Any]:
        """``{"name": ..., "options": {...}}``, ready for ``json.dumps``."""
        return {"name": self.name, "options": copy.deepcopy(dict(self.options))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EngineSpec:
        """Inverse of :meth:`to_dict`.

        Args:
            data: ``{"name": ..., "options": {...}}`` (``options`` may be left out).
        """
        if not isinstance(data, Mapping) or "name" not in data:
            raise InvalidInputError("spec", "must be an object with a name and options", allowed=["name", "options"])
        return cls(data["name"], data.get("options") or {})
