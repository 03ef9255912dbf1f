"""What the tests read from what raytuner keeps: a record's raytuner parts, a JSON store's directory, and values
that may be ``None`` but are known to be there (each check fails the test, never returns ``None``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from raytuner.problem.records import FunctionEvaluation, Provenance, SurrogateModelRecord
from raytuner.store import HistoryStore, JsonStore

T = TypeVar("T")


def provenance(record: FunctionEvaluation) -> Provenance:
    """The ``raytuner`` provenance of a record raytuner wrote (a GPTune record has none: the test fails).

    Example:
        >>> provenance(FunctionEvaluation.create({}, {"x": 1}, {"y": 2.0}, provenance=Provenance(fidelity=3))).fidelity
        3.0
    """
    assert record.raytuner is not None, f"record {record.uid} holds no raytuner provenance"
    return record.raytuner


def description(model: SurrogateModelRecord) -> dict[str, Any]:
    """raytuner's ``raytuner`` description of a surrogate model it stored (GPTune's have none: the test fails)."""
    assert model.raytuner is not None, f"model {model.uid} holds no raytuner description"
    return model.raytuner


def known(value: T | None) -> T:
    """``value``, which the test knows is there: the test fails where it is ``None``.

    Example:
        >>> known(3)
        3
    """
    assert value is not None, "expected a value, got None"
    return value


def json_directory(store: HistoryStore) -> Path:
    """The directory of ``store``, a :class:`JsonStore` (the test fails for any other store)."""
    assert isinstance(store, JsonStore), f"{store!r} is not a JsonStore"
    return store.directory
