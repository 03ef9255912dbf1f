"""Automatic capture of the machine and software configuration of an evaluation.

The machine configuration has exactly GPTune's shape,
``{"machine_name": ..., "<processor>": {"nodes": N, "cores": C}}``: GPTune's
reader takes every other key for a processor name, and its load check skips
a record whose processors the user's loadable machines do not list. The
processor is the user's when the user names one (in a meta description or
a ``machine`` argument), else the detected CPU model; the machine name is
the user's, else the Slurm cluster (``SLURM_CLUSTER_NAME``), else the host;
nodes and cores come from Slurm (``SLURM_JOB_NUM_NODES``,
``SLURM_CPUS_ON_NODE``) when the job runs under it. Everything else
(the host, the CPU model, the Slurm variables, any other key the user gives,
such as GPTune's ``"slurm": "yes"``) is :func:`machine_details`, which a
record keeps under raytuner's own key. The software configuration maps package names to
``{"version_str": "1.2.3", "version_split": [1, 2, 3]}`` for python, numpy,
scipy, GPy, ray and any package the user names. Values the user gives win.

Example:
    >>> m = machine_configuration({"machine_name": "cori", "slurm": "yes"})
    >>> m["machine_name"], "slurm" in m, len(m)
    ('cori', False, 2)
    >>> machine_configuration({"machine_name": "cori", "haswell": {"nodes": 8, "cores": 32}})
    {'machine_name': 'cori', 'haswell': {'nodes': 8, 'cores': 32}}
    >>> software_configuration(["pydantic"])["pydantic"]["version_split"][0] >= 2
    True
"""

from __future__ import annotations

import logging
import os
import platform
import re
import socket
from collections.abc import Iterable, Mapping
from importlib import metadata
from typing import Any

__all__ = [
    "machine_configuration",
    "machine_details",
    "describe_machine",
    "split_machine",
    "software_configuration",
    "version_entry",
    "split_version",
    "cpu_model",
    "DEFAULT_PACKAGES",
]

log = logging.getLogger(__name__)

#: Packages whose versions every record carries.
DEFAULT_PACKAGES: tuple[str, ...] = ("numpy", "scipy", "GPy", "ray")


def cpu_model() -> str:
    """The CPU model name, from ``/proc/cpuinfo`` where there is one."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _int_env(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None:
        return None
    match = re.match(r"\d+", raw)  # SLURM_CPUS_ON_NODE may read "32(x2)" style
    return int(match.group()) if match else None


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def split_machine(machine: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``machine`` split into GPTune's ``machine_configuration`` and the rest.

    GPTune's part is ``machine_name`` and every processor entry (a mapping
    with ``nodes`` or ``cores``); the rest is everything else.

    Args:
        machine: A machine description, GPTune's keys and others mixed.

    >>> split_machine({"machine_name": "m", "EPYC": {"nodes": 1, "cores": 2}, "host": "h"})
    ({'machine_name': 'm', 'EPYC': {'nodes': 1, 'cores': 2}}, {'host': 'h'})
    """
    gptune: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in machine.items():
        processor = isinstance(value, Mapping) and ("nodes" in value or "cores" in value)
        (gptune if key == "machine_name" or processor else rest)[key] = value
    return gptune, rest


def _slurm(env: Mapping[str, str]) -> dict[str, str]:
    return {
        name: env[name]
        for name in ("SLURM_CLUSTER_NAME", "SLURM_JOB_NUM_NODES", "SLURM_CPUS_ON_NODE", "SLURM_JOB_ID")
        if name in env
    }


def machine_configuration(
    user: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """This machine in GPTune's shape, ``{"machine_name": ..., "<processor>": {"nodes", "cores"}}``; ``user`` wins.

    When ``user`` names a processor, it is the only one; else the detected CPU
    model is, with Slurm's node and core counts when the job runs under Slurm.
    ``user``'s keys that are no processor entry are left out (see :func:`machine_details`).

    Args:
        user: the user's machine configuration (default none).
        env: the environment to read Slurm's variables from (default ``os.environ``).
    """
    env = os.environ if env is None else env
    given, _ = split_machine(user or {})
    captured: dict[str, Any] = {"machine_name": env.get("SLURM_CLUSTER_NAME") or socket.gethostname()}
    if all(key == "machine_name" for key in given):  # no processor named
        nodes = _int_env(env, "SLURM_JOB_NUM_NODES") or _int_env(env, "SLURM_NNODES") or 1
        cores = _int_env(env, "SLURM_CPUS_ON_NODE") or os.cpu_count() or 1
        captured[cpu_model()] = {"nodes": nodes, "cores": cores}
    return _deep_merge(captured, given)


def machine_details(user: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What else describes this machine: host, CPU model, Slurm's variables and ``user``'s other keys.

    A record keeps these under raytuner's own key, never in GPTune's ``machine_configuration``.

    Args:
        user: the user's machine configuration; its keys that are no processor entry are kept.
        env: the environment to read Slurm's variables from (default ``os.environ``).

    >>> details = machine_details({"machine_name": "cori", "slurm": "yes"}, env={"SLURM_JOB_ID": "7"})
    >>> details["slurm"], details["slurm_environment"], sorted(details)
    ('yes', {'SLURM_JOB_ID': '7'}, ['cpu_model', 'host', 'slurm', 'slurm_environment'])
    """
    env = os.environ if env is None else env
    _, rest = split_machine(user or {})
    details: dict[str, Any] = {"host": socket.gethostname(), "cpu_model": cpu_model()}
    slurm = _slurm(env)
    if slurm:
        details["slurm_environment"] = slurm
    return _deep_merge(details, rest)


def describe_machine(user: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """:func:`machine_configuration` and :func:`machine_details` in one mapping, as a record's maker takes it.

    :meth:`raytuner.problem.records.FunctionEvaluation.create` splits it again
    (:func:`split_machine`): GPTune's keys to ``machine_configuration``, the rest to ``raytuner.machine``.

    Args:
        user: the user's machine configuration (default none).
        env: the environment to read Slurm's variables from (default ``os.environ``).
    """
    return {**machine_details(user, env), **machine_configuration(user, env)}


def split_version(version: str) -> list[int]:
    """The leading numeric parts of a version string: parts up to the first that is not all digits.

    A part that starts with digits (``"0rc1"``) gives them and ends the version.

    Args:
        version: a version string such as ``"1.26.4"``.

    Example:
        >>> split_version("2.60.0rc1"), split_version("1.x.3"), split_version("dev")
        ([2, 60, 0], [1], [])
    """
    parts: list[int] = []
    for piece in version.split("."):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
        if match.group() != piece:
            break
    return parts


def version_entry(version: str) -> dict[str, Any]:
    """GPTune's version record: the string and its leading numeric parts (:func:`split_version`).

    Args:
        version: a version string.

    >>> version_entry("2.60.0rc1")
    {'version_str': '2.60.0rc1', 'version_split': [2, 60, 0]}
    """
    return {"version_str": version, "version_split": split_version(version)}


def software_configuration(packages: Iterable[str] = (), user: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Versions of python, the default packages and ``packages``; ``user`` values win.

    A package that is not installed is left out (and logged at debug level).

    Args:
        packages: more packages whose versions to capture (default none).
        user: values that win over the captured ones (default none).
    """
    captured: dict[str, Any] = {"python": version_entry(platform.python_version())}
    for name in (*DEFAULT_PACKAGES, *packages):
        try:
            captured[name] = version_entry(metadata.version(name))
        except metadata.PackageNotFoundError:
            log.debug("package %s is not installed; left out of software_configuration", name)
    return _deep_merge(captured, user or {})
