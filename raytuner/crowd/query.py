"""The crowd query interface: ``problem_space`` and ``configuration_space``, validated, then as MongoDB filters.

The shapes follow GPTuneCrowd (section IV-A)::

    problem_space = {
        "input_space": [{"name": "t", "type": "integer", "lower_bound": 1, "upper_bound": 10}],
        "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 10}],
        "output_space": [{"name": "y", "type": "real"}]}
    configuration_space = {
        "machine_configurations": [{"Cori": {"haswell": {"nodes": 1, "cores": 32}}}],
        "software_configurations": [{"gcc": {"version_from": [8, 0, 0], "version_to": [9, 0, 0]}}],
        "user_configurations": ["user_A", "user_B"]}

Semantics:

- ``input_space`` / ``parameter_space`` entries filter the records' task /
  tuning parameter of that name: inclusive ``lower_bound``/``upper_bound``
  (numbers), ``categories`` (a list of values), or, with neither, a type
  (``integer``/``real``: any number) or mere presence. ``output_space`` is
  checked but does not filter (a failed evaluation has no outputs and is
  still data worth having).
- ``machine_configurations``: a record must match one entry (any of); an
  entry names a machine (through the catalog's aliases) and optionally, per
  processor, the exact ``nodes`` and ``cores``.
- ``software_configurations``: a record must match one entry; an entry
  holds packages that must all be present with a version in
  ``[version_from, version_to]`` (inclusive; a missing bound is open),
  compared as versions (:mod:`raytuner.crowd.versions`).
- ``user_configurations``: usernames or e-mail addresses; only records these
  users uploaded.
- Nothing given: every record the caller may see.

Parsing accepts only plain data of those shapes; anything else (a mapping
where a value belongs, ``$`` operators, dotted names) raises
:class:`~raytuner.errors.InvalidInputError` naming the field.

Example:
    >>> ps = ProblemSpaceQuery.parse({"input_space": [{"name": "t", "lower_bound": 1, "upper_bound": 10}]})
    >>> ps.clauses()
    [{'record.task_parameter.t': {'$gte': 1, '$lte': 10}}]
    >>> ConfigurationSpaceQuery.parse({"user_configurations": [{"$ne": None}]})
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: configuration_space.user_configurations[0]: {'$ne': None} is not a valid user name (allowed: 1-64 of letters, digits, '_', '.', '-', starting with a letter or digit)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from raytuner.crowd.names import (
    check_catalog_name,
    check_email,
    check_field_name,
    check_scalar,
    check_username,
)
from raytuner.crowd.versions import version_key, version_parts
from raytuner.errors import InvalidInputError

__all__ = ["SpaceCondition", "ProblemSpaceQuery", "MachineCondition", "SoftwareCondition", "ConfigurationSpaceQuery"]

_TYPES = {"integer": "integer", "int": "integer", "real": "real", "float": "real", "categorical": "categorical"}
_ENTRY_KEYS = {"name", "type", "lower_bound", "upper_bound", "categories", "transformer", "log"}
_SPACE_PATHS = {
    "input_space": "record.task_parameter",
    "parameter_space": "record.tuning_parameter",
    "output_space": "record.evaluation_result",
}
_CONFIG_KEYS = ("machine_configurations", "software_configurations", "user_configurations")
_PROCESSOR_KEYS = ("nodes", "cores")
_RANGE_KEYS = ("version_from", "version_to")


def _mapping(data: Any, field: str, allowed: Sequence[str] | None = None) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise InvalidInputError(field, f"must be an object, not {type(data).__name__}")
    if allowed is not None:
        for key in data:
            if key not in allowed:
                raise InvalidInputError(
                    f"{field}.{key}" if isinstance(key, str) else field, f"unknown key {key!r}", allowed=sorted(allowed)
                )
    return data


def _list(data: Any, field: str) -> list[Any]:
    if not isinstance(data, (list, tuple)):
        raise InvalidInputError(field, f"must be a list, not {type(data).__name__}")
    return list(data)


def _number(value: Any, field: str) -> int | float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        raise InvalidInputError(field, f"{value!r} is not a finite number")
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise InvalidInputError(field, f"{value!r} is out of the 64-bit range")
    return value


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        raise InvalidInputError(field, f"{value!r} is not a non-negative integer")
    return value


@dataclass(frozen=True)
class SpaceCondition:
    """One validated ``problem_space`` entry: where it looks and what it accepts."""

    space: str
    name: str
    type: str | None = None
    lower_bound: int | float | None = None
    upper_bound: int | float | None = None
    categories: tuple[Any, ...] | None = None

    def clause(self) -> dict[str, Any] | None:
        """The MongoDB clause (``None`` for ``output_space``, which does not filter)."""
        if self.space == "output_space":
            return None
        path = f"{_SPACE_PATHS[self.space]}.{self.name}"
        if self.categories is not None:
            return {path: {"$in": list(self.categories)}}
        bounds = {op: b for op, b in (("$gte", self.lower_bound), ("$lte", self.upper_bound)) if b is not None}
        if bounds:
            return {path: bounds}
        if self.type in ("integer", "real"):
            return {path: {"$type": "number"}}
        return {path: {"$exists": True}}


@dataclass(frozen=True)
class ProblemSpaceQuery:
    """A validated ``problem_space``."""

    conditions: tuple[SpaceCondition, ...] = ()

    @classmethod
    def parse(cls, data: Any, field: str = "problem_space") -> ProblemSpaceQuery:
        """Validate ``data`` (``None`` is an empty query).

        Args:
            data: the meta description's ``problem_space`` shape (ranges and categories), or ``None``.
            field: the field named in errors (default ``"problem_space"``).
        """
        if data is None:
            return cls()
        out: list[SpaceCondition] = []
        for space, entries in _mapping(data, field, list(_SPACE_PATHS)).items():
            for i, entry in enumerate(_list(entries, f"{field}.{space}")):
                out.append(_condition(space, entry, f"{field}.{space}[{i}]"))
        return cls(tuple(out))

    def clauses(self) -> list[dict[str, Any]]:
        """The MongoDB clauses, all of which a record must pass."""
        return [c for c in (cond.clause() for cond in self.conditions) if c is not None]


def _condition(space: str, entry: Any, field: str) -> SpaceCondition:
    entry = _mapping(entry, field, sorted(_ENTRY_KEYS))
    if "name" not in entry:
        raise InvalidInputError(f"{field}.name", "is required")
    name = check_field_name(entry["name"], f"{field}.name")
    kind = entry.get("type")
    if kind is not None:
        if not isinstance(kind, str) or kind not in _TYPES:
            raise InvalidInputError(
                f"{field}.type", f"{kind!r} is not a parameter type", allowed=["integer", "real", "categorical"]
            )
        kind = _TYPES[kind]
    lo = _number(entry["lower_bound"], f"{field}.lower_bound") if entry.get("lower_bound") is not None else None
    hi = _number(entry["upper_bound"], f"{field}.upper_bound") if entry.get("upper_bound") is not None else None
    if lo is not None and hi is not None and lo > hi:
        raise InvalidInputError(f"{field}.lower_bound", f"{lo} is above upper_bound {hi}")
    categories = None
    if entry.get("categories") is not None:
        values = _list(entry["categories"], f"{field}.categories")
        if not values:
            raise InvalidInputError(f"{field}.categories", "must hold at least one value")
        categories = tuple(check_scalar(v, f"{field}.categories[{j}]") for j, v in enumerate(values))
        if lo is not None or hi is not None:
            raise InvalidInputError(f"{field}.categories", "give either categories or bounds, not both")
    if kind == "categorical" and (lo is not None or hi is not None):
        raise InvalidInputError(f"{field}.lower_bound", "a categorical parameter takes categories, not bounds")
    return SpaceCondition(space, name, kind, lo, hi, categories)


@dataclass(frozen=True)
class MachineCondition:
    """One ``machine_configurations`` entry: a machine and, per processor, exact nodes/cores."""

    machine: str
    processors: tuple[tuple[str, int | None, int | None], ...] = ()


@dataclass(frozen=True)
class SoftwareCondition:
    """One ``software_configurations`` entry: packages and their inclusive version ranges."""

    packages: tuple[tuple[str, tuple[int, ...] | None, tuple[int, ...] | None], ...]


@dataclass(frozen=True)
class ConfigurationSpaceQuery:
    """A validated ``configuration_space``."""

    machines: tuple[MachineCondition, ...] = ()
    software: tuple[SoftwareCondition, ...] = ()
    users: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, data: Any, field: str = "configuration_space") -> ConfigurationSpaceQuery:
        """Validate ``data`` (``None`` is an empty query).

        Args:
            data: the meta description's ``configuration_space`` shape, or ``None``.
            field: the field named in errors (default ``"configuration_space"``).
        """
        if data is None:
            return cls()
        data = _mapping(data, field, list(_CONFIG_KEYS))
        machines = tuple(
            _machine(e, f"{field}.machine_configurations[{i}]")
            for i, e in enumerate(_list(data.get("machine_configurations", []), f"{field}.machine_configurations"))
        )
        software = tuple(
            _software(e, f"{field}.software_configurations[{i}]")
            for i, e in enumerate(_list(data.get("software_configurations", []), f"{field}.software_configurations"))
        )
        users = tuple(
            _user(u, f"{field}.user_configurations[{i}]")
            for i, u in enumerate(_list(data.get("user_configurations", []), f"{field}.user_configurations"))
        )
        return cls(machines, software, users)

    def clauses(
        self,
        machine_key: Callable[[str], str],
        software_key: Callable[[str], str],
        owners: Callable[[Sequence[str]], list[str]],
    ) -> list[dict[str, Any]]:
        """The MongoDB clauses, all of which a record must pass.

        ``machine_key`` / ``software_key`` turn a name into the stored match key
        (catalog alias resolution, lower case); ``owners`` resolves usernames and
        e-mail addresses to usernames.

        Args:
            machine_key: turns a machine name into its stored match key.
            software_key: turns a software name into its stored match key.
            owners: resolves usernames and e-mail addresses to usernames.
        """
        out: list[dict[str, Any]] = []
        if self.machines:
            out.append({"$or": [_machine_clause(m, machine_key) for m in self.machines]})
        if self.software:
            out.append({"$or": [_software_clause(s, software_key) for s in self.software]})
        if self.users:
            out.append({"owner": {"$in": owners(self.users)}})
        return out


def _machine(entry: Any, field: str) -> MachineCondition:
    entry = _mapping(entry, field)
    if len(entry) != 1:
        raise InvalidInputError(
            field,
            "must map exactly one machine name to its processors",
            allowed=['{"Cori": {"haswell": {"nodes": 1, "cores": 32}}}'],
        )
    ((name, processors),) = entry.items()
    machine = check_catalog_name(name, f"{field}.<machine name>")
    procs = []
    for proc, spec in _mapping(processors, f"{field}.{machine}").items():
        pfield = f"{field}.{machine}.{proc}"
        proc = check_field_name(proc, f"{field}.{machine}.<processor name>")
        spec = _mapping(spec, pfield, _PROCESSOR_KEYS)
        nodes = _count(spec["nodes"], f"{pfield}.nodes") if spec.get("nodes") is not None else None
        cores = _count(spec["cores"], f"{pfield}.cores") if spec.get("cores") is not None else None
        procs.append((proc, nodes, cores))
    return MachineCondition(machine, tuple(procs))


def _software(entry: Any, field: str) -> SoftwareCondition:
    entry = _mapping(entry, field)
    if not entry:
        raise InvalidInputError(field, "must name at least one package")
    packages = []
    for name, spec in entry.items():
        package = check_catalog_name(name, f"{field}.<package name>")
        spec = _mapping(spec, f"{field}.{package}", _RANGE_KEYS)
        lo = (
            tuple(version_parts(spec["version_from"], f"{field}.{package}.version_from"))
            if spec.get("version_from") is not None
            else None
        )
        hi = (
            tuple(version_parts(spec["version_to"], f"{field}.{package}.version_to"))
            if spec.get("version_to") is not None
            else None
        )
        if lo is not None and hi is not None and version_key(lo) > version_key(hi):
            raise InvalidInputError(f"{field}.{package}.version_from", f"{list(lo)} is above version_to {list(hi)}")
        packages.append((package, lo, hi))
    return SoftwareCondition(tuple(packages))


def _user(value: Any, field: str) -> str:
    if isinstance(value, str) and "@" in value:
        return check_email(value, field)
    return check_username(value, field)


def _machine_clause(cond: MachineCondition, machine_key: Callable[[str], str]) -> dict[str, Any]:
    clause: dict[str, Any] = {"machine": machine_key(cond.machine)}
    for proc, nodes, cores in cond.processors:
        base = f"record.machine_configuration.{proc}"
        if nodes is None and cores is None:
            clause[base] = {"$exists": True}
        if nodes is not None:
            clause[f"{base}.nodes"] = nodes
        if cores is not None:
            clause[f"{base}.cores"] = cores
    return clause


def _software_clause(cond: SoftwareCondition, software_key: Callable[[str], str]) -> dict[str, Any]:
    parts = []
    for package, lo, hi in cond.packages:
        match: dict[str, Any] = {"name": software_key(package)}
        bounds = {}
        if lo is not None:
            bounds["$gte"] = version_key(lo)
        if hi is not None:
            bounds["$lte"] = version_key(hi)
        if bounds:
            match["vkey"] = bounds
        parts.append({"software": {"$elemMatch": match}})
    return parts[0] if len(parts) == 1 else {"$and": parts}
