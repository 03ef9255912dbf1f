"""Kernel Tuner cache files: measured GPU-kernel search spaces, read as lookup-table objectives.

A Kernel Tuner cache (``*.json`` or gzip-compressed ``*.json.gz``) holds a
brute-force run of one kernel on one GPU: ``device_name``, ``kernel_name``,
``tune_params_keys`` (the parameter names, in order), ``tune_params`` (name
-> its values), ``objective`` and ``cache``, which maps each *valid*
configuration (its values joined by commas in ``tune_params_keys`` order) to
its measurements. ``time`` is the mean run time in ms, or a string such as
``"CompilationFailedConfig"`` for a configuration that failed to compile or
run. Configurations that break the kernel's restrictions are not stored at
all: they are outside the valid space. Kernel Tuner writes the file as it
goes, so a cache may end "open" (a trailing comma and no closing braces);
:func:`load_cache` closes it.

The caches the benchmarks read live outside the project
(``../shared/data/kernel_tuner``, see ``shared/data/README.md``); they are
read in place, never copied. :func:`default_data_dir` finds the folder the
way :func:`raytuner.test_problems.lcbench.default_data_dir` does
(``$RAYTUNER_SHARED_DATA/kernel_tuner`` or ``<repo>/../shared/data/kernel_tuner``).

Example:
    >>> cache = load_cache(default_data_dir() / "dedispersion_A100.json.gz")   # doctest: +SKIP
    >>> len(cache.configs), cache.failed, round(cache.optimum, 1)                # doctest: +SKIP
    (11130, 0, 68.1)
    >>> problem = cache.problem()                                               # doctest: +SKIP
    >>> cache.time(cache.configs[0]) is not None                                # doctest: +SKIP
    True
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from raytuner.errors import InvalidInputError
from raytuner.problem.space import ProblemSpace

__all__ = ["KernelCache", "load_cache", "parse_cache_text", "default_data_dir", "FAILURE_STRINGS"]

log = logging.getLogger(__name__)

#: The ``time`` strings Kernel Tuner writes for a configuration that failed.
FAILURE_STRINGS: tuple[str, ...] = ("CompilationFailedConfig", "RuntimeFailedConfig", "InvalidConfig")
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]')


def default_data_dir() -> Path:
    """The ``kernel_tuner`` folder of the first data folder that has one (:func:`benchmarks.data.find`)."""
    from benchmarks.data import find

    return find("kernel_tuner")


def _close_open_json(text: str) -> str:
    """``text`` with a dangling comma removed and its open braces and brackets closed.

    A last entry cut off mid-way is dropped: the text is cut after the last
    value that closed completely.

    >>> json.loads(_close_open_json('{"a": 1, "cache": {"1,2": {"time": 3.5},\\n'))
    {'a': 1, 'cache': {'1,2': {'time': 3.5}}}
    >>> json.loads(_close_open_json('{"cache": {"1": {"time": 3}, "2": {"ti'))
    {'cache': {'1': {'time': 3}}}
    """
    closers = {"{": "}", "[": "]"}
    stack: list[str] = []
    last_end, last_stack = 0, ""
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in closers:
            stack.append(closers[token])
        elif stack and token == stack[-1]:
            stack.pop()
            last_end, last_stack = match.end(), "".join(reversed(stack))
    # an unterminated string after the last complete value leaves an odd number of quotes there
    quotes_after = len(re.findall(r'(?<!\\)"', text[last_end:]))
    body = text.rstrip()
    if quotes_after % 2 == 0 and body and body[-1] in ",{[}]":
        candidate = body.rstrip(",").rstrip() + "".join(reversed(stack))
        try:
            json.loads(candidate)
            return candidate
        except json.JSONDecodeError:
            pass
    return text[:last_end].rstrip() + last_stack


def parse_cache_text(text: str, source: str = "<text>") -> dict[str, Any]:
    """The JSON document of a cache file's text, closing an "open" cache first when it needs it.

    Args:
        text: the file's text.
        source: where it came from, for error messages (default ``"<text>"``).
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        try:
            document = json.loads(_close_open_json(text))
        except json.JSONDecodeError:
            raise InvalidInputError("path", f"{source} is not a Kernel Tuner cache: {exc}") from None
        log.info("%s ends open (an unfinished Kernel Tuner run); closed it", source)
    if not isinstance(document, dict):
        raise InvalidInputError("path", f"{source} is not a Kernel Tuner cache: the top level is not an object")
    missing = [k for k in ("tune_params_keys", "tune_params", "cache") if k not in document]
    if missing:
        raise InvalidInputError("path", f"{source} is not a Kernel Tuner cache: no {', '.join(missing)}")
    return document


@dataclass
class KernelCache:
    """One Kernel Tuner cache: the search space and the measurement of every valid configuration.

    ``configs`` are the stored (valid) configurations, each a dict of the
    parameter values in :attr:`parameter_names` order; a failed one is stored
    too, and its :meth:`time` is ``None``. See the module docstring.

    >>> cache = KernelCache.from_document({
    ...     "device_name": "GPU", "kernel_name": "k", "tune_params_keys": ["bx", "tile"],
    ...     "tune_params": {"bx": [32, 64], "tile": [1, 2]}, "objective": "time",
    ...     "cache": {"32,1": {"bx": 32, "tile": 1, "time": 2.5}, "64,1": {"bx": 64, "tile": 1, "time": 1.5},
    ...               "64,2": {"bx": 64, "tile": 2, "time": "RuntimeFailedConfig"}}})
    >>> len(cache.configs), cache.failed, cache.optimum, cache.best_config
    (3, 1, 1.5, {'bx': 64, 'tile': 1})
    >>> cache.time({"bx": 32, "tile": 1}), cache.time({"bx": "64", "tile": 2}), {"bx": 32, "tile": 2} in cache
    (2.5, None, False)
    >>> cache.problem().parameter_space["bx"].categories
    [32, 64]
    """

    device: str
    kernel: str
    parameter_names: list[str]
    values: dict[str, list[Any]]
    configs: list[dict[str, Any]]
    objective: str = "time"
    problem_size: Any = None
    source: str = "<document>"
    _entries: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict, repr=False)
    _lookup: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _times: list[float | None] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self._lookup:
            self._lookup = [_value_lookup(self.values[n]) for n in self.parameter_names]
        if not self._entries:
            self._entries = {tuple(c[n] for n in self.parameter_names): {**c, "time": None} for c in self.configs}
        self._times = [
            _number(self._entries[tuple(c[n] for n in self.parameter_names)].get("time")) for c in self.configs
        ]

    @classmethod
    def from_document(cls, document: Mapping[str, Any], source: str = "<document>") -> KernelCache:
        """A cache from the parsed JSON of a cache file.

        Args:
            document: the cache file's JSON object.
            source: where it came from, for error messages (default ``"<document>"``).
        """
        names = [str(n) for n in document["tune_params_keys"]]
        values = {n: list(document["tune_params"][n]) for n in names}
        lookup = [_value_lookup(values[n]) for n in names]
        entries: dict[tuple[Any, ...], dict[str, Any]] = {}
        configs: list[dict[str, Any]] = []
        for key, entry in document["cache"].items():
            parts = str(key).split(",")
            raw = [entry.get(n, parts[i] if i < len(parts) else None) for i, n in enumerate(names)]
            try:
                canonical = tuple(
                    table[repr(v)] if repr(v) in table else table[str(v)] for table, v in zip(lookup, raw)
                )
            except KeyError:
                log.warning("%s: cache entry %r has a value outside tune_params; skipped", source, key)
                continue
            if canonical in entries:
                continue
            entries[canonical] = dict(entry)
            configs.append(dict(zip(names, canonical)))
        return cls(
            device=str(document.get("device_name", "unknown")),
            kernel=str(document.get("kernel_name", "unknown")),
            parameter_names=names,
            values=values,
            configs=configs,
            objective=str(document.get("objective", "time")),
            problem_size=document.get("problem_size"),
            source=source,
            _entries=entries,
            _lookup=lookup,
        )

    # -- lookups ---------------------------------------------------------------------------------
    def _key(self, config: Mapping[str, Any]) -> tuple[Any, ...] | None:
        try:
            values = [config[n] for n in self.parameter_names]
        except KeyError:
            return None
        key = []
        for table, v in zip(self._lookup, values):
            canonical = table.get(repr(v), table.get(str(v)))
            if canonical is None:
                return None
            key.append(canonical)
        return tuple(key)

    def __contains__(self, config: object) -> bool:
        """Whether ``config`` is a stored (valid) configuration, failed or not."""
        return isinstance(config, Mapping) and self._key(config) in self._entries

    def __len__(self) -> int:
        return len(self.configs)

    def entry(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The stored measurements of ``config``; an error when it is outside the valid space.

        Args:
            config: a configuration: parameter name to value.
        """
        key = self._key(config)
        if key is None or key not in self._entries:
            raise InvalidInputError(
                "config",
                f"{dict(config)} is not in the cache of {self.kernel} on {self.device}: outside the valid space",
            )
        return self._entries[key]

    def value(self, config: Mapping[str, Any], name: str = "time") -> float | None:
        """Output ``name`` of ``config``; ``None`` when it failed (a string or a non-finite value there).

        Args:
            config: a configuration: parameter name to value.
            name: the output to read (default ``"time"``).
        """
        return _number(self.entry(config).get(name))

    def time(self, config: Mapping[str, Any]) -> float | None:
        """The measured time of ``config`` in ms; ``None`` for a failed configuration.

        Args:
            config: a configuration: parameter name to value.
        """
        return self.value(config, "time")

    def failure(self, config: Mapping[str, Any]) -> str | None:
        """Why ``config`` failed (Kernel Tuner's string, say ``"CompilationFailedConfig"``); ``None`` if it ran.

        Args:
            config: a configuration: parameter name to value.
        """
        if self.time(config) is not None:
            return None
        raw = self.entry(config).get("time")
        return raw if isinstance(raw, str) else f"no valid time ({raw!r})"

    @property
    def times(self) -> list[float | None]:
        """The time of each of :attr:`configs`, in order (``None`` where it failed)."""
        return list(self._times)

    @property
    def failed(self) -> int:
        """How many stored configurations failed."""
        return sum(1 for t in self._times if t is None)

    @property
    def optimum(self) -> float:
        """The best (lowest) time of any configuration."""
        return self._times[self._best_index()] or math.nan

    @property
    def best_config(self) -> dict[str, Any]:
        """The configuration with the lowest time."""
        return dict(self.configs[self._best_index()])

    def _best_index(self) -> int:
        best = min(((t, i) for i, t in enumerate(self._times) if t is not None), default=None)
        if best is None:
            raise InvalidInputError("cache", f"{self.source} holds no successful configuration")
        return best[1]

    @property
    def cartesian_size(self) -> int:
        """The size of the full Cartesian space of ``tune_params`` (valid or not)."""
        return math.prod(len(v) for v in self.values.values())

    def problem(self, *, restrict_to_valid: bool = False, name: str = "time") -> ProblemSpace:
        """The tuning problem: each parameter categorical over its listed values (in order), output
        ``name`` minimised, no task parameters.

        ``restrict_to_valid`` adds a constraint that only the stored
        configurations satisfy, so that samplers and acquisition searches
        that honour constraints (MLA's) never propose a configuration outside
        the valid space. Such a problem does not serialise its constraint.

        Args:
            restrict_to_valid: add the constraint that keeps proposals among the stored configurations (default
                ``False``).
            name: the output to minimise (default ``"time"``).
        """
        spec: dict[str, Any] = {
            "parameter_space": [
                {"name": n, "type": "categorical", "categories": list(self.values[n])} for n in self.parameter_names
            ],
            "output_space": [{"name": name, "goal": "minimize"}],
        }
        if restrict_to_valid:
            spec["constraints"] = {"stored_in_cache": self._stored}
        return ProblemSpace.parse(spec)

    def _stored(self, **values: Any) -> bool:
        return self._key(values) in self._entries

    def sample(self, n: int, seed: int | None = None, *, successful_only: bool = False) -> list[dict[str, Any]]:
        """``n`` distinct stored configurations drawn uniformly at random (all of them when ``n`` is larger).

        Args:
            n: how many configurations.
            seed: the random generator's seed (default ``None``: unseeded).
            successful_only: draw only configurations that ran (default ``False``).
        """
        pool = [c for c, t in zip(self.configs, self._times) if not successful_only or t is not None]
        rng = np.random.default_rng(seed)
        picks = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
        return [dict(pool[int(i)]) for i in picks]


def _number(raw: Any) -> float | None:
    """``raw`` as a finite float, else ``None`` (Kernel Tuner's failure strings, NaN, missing)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(float(raw)):
        return None
    return float(raw)


def _value_lookup(values: Sequence[Any]) -> dict[str, Any]:
    """``repr`` and ``str`` of each listed value -> the value (so 2, "2" and 2.0 for 2 all find it)."""
    table: dict[str, Any] = {}
    for v in values:
        for spelling in (str(v), repr(v)):
            table.setdefault(spelling, v)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer():
            table.setdefault(repr(float(v)), v)
            table.setdefault(str(int(v)), v)
    return table


def load_cache(path: str | Path) -> KernelCache:
    """Read the Kernel Tuner cache at ``path`` (``.json`` or gzip ``.json.gz``; an open cache is closed).

    A missing file raises :class:`FileNotFoundError` naming it; a file that is
    not a cache, :class:`~raytuner.errors.InvalidInputError`.

    Args:
        path: the cache file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"Kernel Tuner cache not found: {path}. Pass python -m benchmarks --data DIR (the "
            "folder holding kernel_tuner/), or the file's path."
        )
    with open(path, "rb") as fh:
        magic = fh.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        text = fh.read()
    cache = KernelCache.from_document(parse_cache_text(text, str(path)), source=str(path))
    log.debug(
        "%s: %s on %s, %d configurations (%d failed)",
        path,
        cache.kernel,
        cache.device,
        len(cache.configs),
        cache.failed,
    )
    return cache
