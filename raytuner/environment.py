"""Automatic capture of the machine and software configuration of an evaluation.

The machine configuration follows GPTune's shape,
``{"machine_name": ..., "<processor>": {"nodes": N, "cores": C}}``, with the
host, the CPU model and the Slurm allocation (``SLURM_CLUSTER_NAME``,
``SLURM_JOB_NUM_NODES``, ``SLURM_CPUS_ON_NODE``, ``SLURM_JOB_ID``) when the job
runs under Slurm. The software configuration maps package names to
``{"version_str": "1.2.3", "version_split": [1, 2, 3]}`` for python, numpy,
scipy, GPy, ray and any package the user names. Values the user gives win.

Example:
    >>> m = machine_configuration({"machine_name": "cori"})
    >>> m["machine_name"]
    'cori'
    >>> software_configuration(["pydantic"])["pydantic"]["version_split"][0] >= 2
    True
"""

from __future__ import annotations

import logging
import os
import platform
import re
import socket
from importlib import metadata
from typing import Any, Iterable, Mapping

__all__ = ["machine_configuration", "software_configuration", "version_entry", "split_version", "cpu_model",
           "DEFAULT_PACKAGES"]

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


def machine_configuration(user: Mapping[str, Any] | None = None,
                          env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Describe this machine (and its Slurm allocation); ``user`` values win.

    ``env`` defaults to ``os.environ``; pass a mapping to describe another job.

    Args:
        user: values that win over the captured ones (default none).
        env: the environment to read Slurm's variables from (default ``os.environ``).
    """
    env = os.environ if env is None else env
    slurm = {name: env[name] for name in
             ("SLURM_CLUSTER_NAME", "SLURM_JOB_NUM_NODES", "SLURM_CPUS_ON_NODE", "SLURM_JOB_ID")
             if name in env}
    host = socket.gethostname()
    processor = cpu_model()
    nodes = _int_env(env, "SLURM_JOB_NUM_NODES") or 1
    cores = _int_env(env, "SLURM_CPUS_ON_NODE") or os.cpu_count() or 1
    captured: dict[str, Any] = {
        "machine_name": env.get("SLURM_CLUSTER_NAME") or host,
        processor: {"nodes": nodes, "cores": cores},
        "host": host,
    }
    if slurm:
        captured["slurm"] = slurm
    return _deep_merge(captured, user or {})


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


def software_configuration(packages: Iterable[str] = (),
                           user: Mapping[str, Any] | None = None) -> dict[str, Any]:
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
