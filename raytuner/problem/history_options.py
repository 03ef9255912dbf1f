"""GPTune's history-database options: what a session loads from its store and what it writes there.

GPTune's meta description carries them at its top level; here they are one
:class:`HistoryOptions`, which :class:`~raytuner.problem.meta.MetaDescription` gives
(:meth:`~raytuner.problem.meta.MetaDescription.history_options`) and every face takes
(``TuningSession(..., history=...)``, the Ray searchers' and the GPTuneBand
scheduler's ``history=`` session option, the service's meta description):

- ``load_func_eval``: replay the stored evaluations of the session's tasks
  when it starts. Unset, each face keeps its own default: a local session
  replays the store's history, a service session only its own records. A
  session's own records (a restart of the same session id) are always
  replayed: they are this run, not history.
- ``save_func_eval``: write the session's evaluations to the history store.
  With ``no`` they stay out of the history (others never see them) but are
  still durable, in the session's ledger (log ``session_evaluations``), so a
  restarted session still knows which of its trials were told.
- ``save_model``: write the surrogate models an engine fits to the store.
- ``load_surrogate_model``: with ``yes`` the last stored model of the
  engine's modeler and tasks is used as it is (its hyperparameters are never
  re-fitted, only conditioned on the data), as GPTune does; with ``no`` (the
  default) a stored model only warm-starts the fit.
- ``loadable_machine_configurations`` / ``loadable_software_configurations``
  and ``no_load_check``: GPTune's load check (``HistoryDB.check_load_deps``).
  A stored evaluation of another session is replayed only when its machine
  is listed, each of its processors is listed for that machine with its node
  and core counts (an integer, or a list of the allowed ones), and each
  listed package is in its software configuration with a version that
  matches (``version_split`` exactly, or within ``version_from`` ..
  ``version_to``, bounds included). Versions are compared part by part as
  integers, so 3.10 is newer than 3.9.1 (GPTune joins the digits into one
  number, which orders them the other way). Unlike GPTune, a missing list
  checks nothing (GPTune's default is the user's own configuration), so that
  a description without them loads what it loaded before; ``no_load_check``
  turns the check off whatever the lists say. The check chooses evaluations;
  stored surrogate models are not checked (``load_surrogate_model`` takes
  the last model of the engine's modeler and tasks, wherever it was fitted).

Example:
    >>> options = HistoryOptions.parse({"load_func_eval": "no", "loadable_machine_configurations": {
    ...     "cori": {"haswell": {"nodes": [1, 2], "cores": 32}}}})
    >>> options.load_func_eval, options.save_func_eval
    (False, True)
    >>> record = {"machine_configuration": {"machine_name": "cori", "haswell": {"nodes": 2, "cores": 32}},
    ...           "software_configuration": {}}
    >>> options.loadable(record), options.loadable({**record, "machine_configuration": {"machine_name": "x"}})
    (True, False)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from raytuner.errors import InvalidInputError, validate

__all__ = ["HistoryOptions", "LoadableProcessor", "LoadableSoftware", "yes_no", "HISTORY_FIELDS"]

log = logging.getLogger(__name__)

R = TypeVar("R")

_YES = {"yes", "y", "true"}
_NO = {"no", "n", "false"}


def yes_no(value: Any, field: str) -> bool:
    """A GPTune yes/no value (``"yes"``, ``"y"``, ``"no"``, ``"n"``, or a boolean) as a boolean.

    Args:
        value: The value as given.
        field: The field named when the value is neither.

    >>> yes_no("y", "save_model"), yes_no(False, "save_model")
    (True, False)
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _YES | _NO:
        return value.lower() in _YES
    raise InvalidInputError(field, f"{value!r} is not a yes/no value", allowed=["yes", "no", "y", "n"])


def _count_matches(value: Any, allowed: int | list[int] | None) -> bool:
    if allowed is None:
        return True
    return value in allowed if isinstance(allowed, list) else value == allowed


def _split(version: Any) -> tuple[int, ...] | None:
    if not isinstance(version, (list, tuple)) or not all(
        isinstance(p, int) and not isinstance(p, bool) for p in version
    ):
        return None
    return tuple(version)


def _padded(version: Sequence[int], other: Sequence[int]) -> tuple[int, ...]:
    """``version`` with zeros up to ``other``'s length, so that 8 and 8.0.0 compare equal."""
    return tuple(version) + (0,) * max(0, len(other) - len(version))


class LoadableProcessor(BaseModel):
    """The node and core counts a loadable processor may have: one count, or a list (absent: any)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nodes: int | list[int] | None = None
    cores: int | list[int] | None = None

    def allows(self, entry: Any) -> bool:
        """Whether a record's processor entry ``{"nodes": N, "cores": C}`` has loadable counts.

        Args:
            entry: The record's processor entry.
        """
        if not isinstance(entry, Mapping):
            return False
        return _count_matches(entry.get("nodes"), self.nodes) and _count_matches(entry.get("cores"), self.cores)


class LoadableSoftware(BaseModel):
    """The versions of a package a loadable record may have (at least one key; a record matching any passes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version_split: list[int] | None = None
    version_from: list[int] | None = None
    version_to: list[int] | None = None

    @model_validator(mode="after")
    def _some(self) -> LoadableSoftware:
        if self.version_split is None and self.version_from is None and self.version_to is None:
            raise ValueError("give version_split, version_from or version_to")
        return self

    def allows(self, entry: Any) -> bool:
        """Whether a record's package entry (with ``version_split``) has a loadable version.

        Args:
            entry: The record's entry for the package.
        """
        version = _split(entry.get("version_split")) if isinstance(entry, Mapping) else None
        if version is None:
            return False
        if self.version_split is not None and version == tuple(self.version_split):
            return True
        if self.version_from is None and self.version_to is None:
            return False
        low = self.version_from is None or _padded(version, self.version_from) >= _padded(self.version_from, version)
        high = self.version_to is None or _padded(version, self.version_to) <= _padded(self.version_to, version)
        return low and high


#: The meta description's fields that are history-database options (GPTune's names).
HISTORY_FIELDS = (
    "load_func_eval",
    "save_func_eval",
    "save_model",
    "load_surrogate_model",
    "loadable_machine_configurations",
    "loadable_software_configurations",
    "no_load_check",
)


class HistoryOptions(BaseModel):
    """What a session loads from its history store and writes to it (see the module documentation)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    load_func_eval: bool | None = None
    save_func_eval: bool = True
    save_model: bool = True
    load_surrogate_model: bool = False
    loadable_machine_configurations: dict[str, dict[str, LoadableProcessor]] | None = None
    loadable_software_configurations: dict[str, LoadableSoftware] | None = None
    no_load_check: bool = False

    @field_validator(
        "load_func_eval", "save_func_eval", "save_model", "load_surrogate_model", "no_load_check", mode="before"
    )
    @classmethod
    def _flag(cls, value: Any) -> Any:
        return None if value is None else yes_no(value, "")  # validate() names the field

    @classmethod
    def parse(cls, data: HistoryOptions | Mapping[str, Any] | None) -> HistoryOptions:
        """Validate the options, raising :class:`~raytuner.errors.InvalidInputError` naming the field.

        Args:
            data: The options (GPTune's names and yes/no values), or ``None`` for the defaults.
        """
        if isinstance(data, HistoryOptions):
            return data
        return validate(cls, {} if data is None else data)

    def loads(self, default: bool) -> bool:
        """Whether the session replays the stored history (``load_func_eval``, else the face's ``default``).

        Args:
            default: The face's own default.
        """
        return default if self.load_func_eval is None else self.load_func_eval

    @property
    def checks_load(self) -> bool:
        """Whether stored evaluations are checked against the loadable configurations."""
        return not self.no_load_check and (
            self.loadable_machine_configurations is not None or self.loadable_software_configurations is not None
        )

    def loadable(self, record: Any) -> bool:
        """Whether a stored evaluation passes the load check (always, when there is none).

        Args:
            record: A :class:`~raytuner.problem.records.FunctionEvaluation` or its plain data.
        """
        if not self.checks_load:
            return True

        def field(name: str) -> Any:
            return record.get(name) if isinstance(record, Mapping) else getattr(record, name, None)

        return self._machine_allows(field("machine_configuration")) and self._software_allows(
            field("software_configuration")
        )

    def _machine_allows(self, machine: Any) -> bool:
        if self.loadable_machine_configurations is None:
            return True
        if (
            not isinstance(machine, Mapping)
            or not isinstance(machine.get("machine_name"), str)
            or machine["machine_name"] not in self.loadable_machine_configurations
        ):
            return False
        processors = self.loadable_machine_configurations[machine["machine_name"]]
        return all(
            name in processors and processors[name].allows(entry)
            for name, entry in machine.items()
            if name != "machine_name"
        )

    def _software_allows(self, software: Any) -> bool:
        if self.loadable_software_configurations is None:
            return True
        if not isinstance(software, Mapping):
            return False
        return all(
            name in software and wanted.allows(software[name])
            for name, wanted in self.loadable_software_configurations.items()
        )

    def replayed(self, stored: Sequence[R], owns: Callable[[R], bool], default: bool) -> list[R]:
        """The stored evaluations a session replays, in store order: its own, and the others these options allow.

        Args:
            stored: The stored evaluations of the session's tasks, oldest first.
            owns: Whether an evaluation is the session's own (always replayed).
            default: The face's own default for ``load_func_eval``.
        """
        load = self.loads(default)
        kept, refused = [], 0
        for record in stored:
            if owns(record) or (load and self.loadable(record)):
                kept.append(record)
            elif load:
                refused += 1
        if refused:
            log.info(
                "%d stored evaluation(s) fail the load check (loadable machine and software configurations) "
                "and are not replayed",
                refused,
            )
        return kept

    def to_meta(self) -> dict[str, Any]:
        """The options as a GPTune meta description writes them (yes/no; unset ones left out)."""
        data = self.model_dump(exclude_none=True, exclude_defaults=True)
        return {key: ("yes" if value else "no") if isinstance(value, bool) else value for key, value in data.items()}
