"""GPTuneCrowd's meta description of a tuning problem, as pydantic models.

The meta description (GPTuneCrowd, section IV-A) names the tuning problem,
its spaces (``problem_space``, also used as the ranges to query the crowd
repository for), which environments' data to accept (``configuration_space``:
machines, software version ranges, users), the environment of this run
(``machine_configuration``, ``software_configuration``) and whether to upload
results (``sync_crowd_repo``).

Example (the paper's example):
    >>> meta = MetaDescription.parse({
    ...     "tuning_problem_name": "my_example",
    ...     "problem_space": {
    ...         "input_space": [{"name": "t", "type": "integer", "lower_bound": 1, "upper_bound": 10}],
    ...         "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 10}],
    ...         "output_space": [{"name": "y", "type": "real"}]},
    ...     "configuration_space": {
    ...         "machine_configurations": [{"Cori": {"haswell": {"nodes": 1, "cores": 32}}}],
    ...         "software_configurations": [{"gcc": {"version_from": [8, 0, 0], "version_to": [9, 0, 0]}}],
    ...         "user_configurations": ["user_A", "user_B"]},
    ...     "machine_configuration": {"machine_name": "Cori", "slurm": "yes"},
    ...     "software_configuration": {"spack": "ScaLAPACK"},
    ...     "sync_crowd_repo": "yes"})
    >>> meta.sync_crowd_repo, meta.problem_space.parameter_space.names
    (True, ['x'])
    >>> meta.to_dict()["sync_crowd_repo"]
    'yes'
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_serializer,
    field_validator,
    model_validator,
)

from raytuner.errors import InvalidInputError, validate
from raytuner.problem.history_options import HISTORY_FIELDS, HistoryOptions, yes_no
from raytuner.problem.records import check_problem_name
from raytuner.problem.space import ProblemSpace

__all__ = ["MetaDescription", "ConfigurationSpace", "ProcessorConfiguration", "VersionRange"]


class VersionRange(BaseModel):
    """An inclusive range of versions, compared part by part as integers (not as strings).

    >>> VersionRange(version_from=[8, 0, 0], version_to=[9, 0, 0]).contains([8, 10, 1])
    True
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    version_from: list[int] | None = None
    version_to: list[int] | None = None

    def contains(self, version: Sequence[int]) -> bool:
        """Whether ``version`` lies in the range (a missing bound is open).

        Args:
            version: a split version (``[3, 11, 7]``).
        """
        v = tuple(version)
        if self.version_from is not None and v < tuple(self.version_from):
            return False
        if self.version_to is not None and v > tuple(self.version_to):
            return False
        return True


class ProcessorConfiguration(BaseModel):
    """Nodes and cores per node of one processor type of a machine."""

    model_config = ConfigDict(extra="allow")

    nodes: int = Field(ge=0)
    cores: int = Field(ge=0)


class ConfigurationSpace(BaseModel):
    """Which environments' data a user accepts: any machine / software / user listed.

    ``machine_configurations`` entries map a machine name to its processors,
    ``{"Cori": {"haswell": {"nodes": 1, "cores": 32}}}``; software entries map a
    package to a :class:`VersionRange`; users are names or e-mail addresses.
    Empty lists accept everything.
    """

    model_config = ConfigDict(extra="forbid")

    machine_configurations: list[dict[str, dict[str, ProcessorConfiguration]]] = Field(default_factory=list)
    software_configurations: list[dict[str, VersionRange]] = Field(default_factory=list)
    user_configurations: list[str] = Field(default_factory=list)


class MetaDescription(BaseModel):
    """A tuning problem's meta description (GPTuneCrowd section IV-A).

    ``api_key`` is a secret: it never shows in ``repr`` or logs, only in
    :meth:`to_dict` (which writes the file the user gave back). GPTune's
    history-database options (``load_func_eval``, ``save_func_eval``,
    ``save_model``, ``load_surrogate_model``, ``loadable_machine_configurations``,
    ``loadable_software_configurations``, ``no_load_check``) sit at the top
    level as in GPTune's files and are read into :attr:`history`;
    ``historydb_path`` is where a face that opens the store from the
    description finds it, ``tuning_problem_category`` GPTune's category of the problem.
    """

    model_config = ConfigDict(extra="forbid")

    api_key: SecretStr | None = None
    tuning_problem_name: str
    problem_space: ProblemSpace
    configuration_space: ConfigurationSpace = Field(default_factory=ConfigurationSpace)
    machine_configuration: dict[str, Any] = Field(default_factory=dict)
    software_configuration: dict[str, Any] = Field(default_factory=dict)
    sync_crowd_repo: bool = False
    tuning_problem_category: str | None = None
    historydb_path: str | None = Field(default=None, min_length=1)
    history: HistoryOptions = Field(default_factory=HistoryOptions, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _history(cls, data: Any) -> Any:
        if isinstance(data, dict) and "history" not in data:
            data = dict(data)
            data["history"] = HistoryOptions.parse({k: data.pop(k) for k in HISTORY_FIELDS if k in data})
        return data

    @field_validator("tuning_problem_name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_problem_name(v, field="name")

    @field_validator("sync_crowd_repo", mode="before")
    @classmethod
    def _sync(cls, v: Any) -> bool:
        return yes_no(v, "")  # validate() names the field

    @field_serializer("sync_crowd_repo")
    def _sync_out(self, v: bool) -> str:
        return "yes" if v else "no"

    @field_serializer("api_key")
    def _key_out(self, v: SecretStr | None) -> str | None:
        return v.get_secret_value() if v is not None else None

    @classmethod
    def parse(cls, data: Any) -> MetaDescription:
        """Validate a meta description, raising :class:`InvalidInputError` naming the field.

        Args:
            data: the meta description as plain data (GPTuneCrowd's shape).
        """
        return validate(cls, data)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MetaDescription:
        """Read a meta description from a JSON file.

        Args:
            path: the JSON file.
        """
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(str(path), f"not valid JSON: {exc}") from None
        return cls.parse(data)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data that :meth:`parse` reads back to an equal description."""
        data = self.model_dump(mode="python")
        for key in ("api_key", "tuning_problem_category", "historydb_path"):
            if data[key] is None:
                del data[key]
        data.update(self.history.to_meta())
        return data
