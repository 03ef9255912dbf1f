"""What one session may ask of a server: caps on the options that scale an Ask's work, and its time budget.

A session's engine options come from the client. Without caps a key holder
could ask for 40 model-fit starts on every record of a problem and keep a
server's CPUs for minutes. :class:`SessionLimits` holds the server's caps
(``raytuner serve --limit NAME=VALUE``); :meth:`SessionLimits.check` refuses
a ``CreateSession`` whose options ask for more with one line that names the
option, the limit and the value (``INVALID_ARGUMENT``). ``fit_seconds``
is also the time budget of every Ask's model fits
(:func:`raytuner.models.budget.fit_budget`): a fit still running then stops
and keeps the best hyperparameters it found (or the last fitted ones), so
the sessions created before a limit was lowered are bounded too.

=================  =======  ==================================================================
limit              default  bounds
=================  =======  ==================================================================
``fit_seconds``    2        ``lcm.timeout``; the model-fit time of one Ask
``starts``         8        ``lcm.n_starts``, ``lcm.warm_starts``
``iterations``     500      ``lcm.max_iterations``, ``lcm.warm_iterations``
``screen``         16       ``lcm.screen``
``fit_samples``    1000     ``lcm.fit_limit`` (``null``, no limit, is over it)
``exact_samples``  2000     ``lcm.exact_limit`` (``null`` is over it)
``latent``         8        ``lcm.latent``, ``lcm.rank``
``candidates``     20000    ``search_candidates``; the length of a ``candidates`` list
``initial``        200      ``n_initial``
``tasks``          100      the session's tasks
=================  =======  ==================================================================

Example:
    >>> limits = SessionLimits.parse(["starts=4"])
    >>> limits.starts, limits.fit_seconds
    (4, 2.0)
    >>> limits.check({"n_initial": 5, "lcm": {"n_starts": 4}}, tasks=1)
    >>> limits.check({"lcm": {"n_starts": 40}}, tasks=1)
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: options.lcm.n_starts: 40 is over this server's limit starts=4 (raytuner serve --limit starts=N)
    >>> SessionLimits.parse(["stars=4"])
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: --limit: unknown limit 'stars' (allowed: fit_seconds, starts, iterations, screen, fit_samples, exact_samples, latent, candidates, initial, tasks)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from raytuner.errors import InvalidInputError

__all__ = ["SessionLimits"]

#: Engine options (``lcm.`` ones inside the LCM's options) and the limit each is bounded by.
_BOUNDED: tuple[tuple[str, str], ...] = (
    ("n_initial", "initial"),
    ("search_candidates", "candidates"),
    ("lcm.timeout", "fit_seconds"),
    ("lcm.n_starts", "starts"),
    ("lcm.warm_starts", "starts"),
    ("lcm.max_iterations", "iterations"),
    ("lcm.warm_iterations", "iterations"),
    ("lcm.screen", "screen"),
    ("lcm.fit_limit", "fit_samples"),
    ("lcm.exact_limit", "exact_samples"),
    ("lcm.latent", "latent"),
    ("lcm.rank", "latent"),
)
#: Options whose ``null`` means "no limit", hence over any limit.
_NULL_IS_UNBOUNDED = frozenset({"lcm.fit_limit", "lcm.exact_limit"})


@dataclass(frozen=True)
class SessionLimits:
    """A server's caps on what one session may ask for (see the module docstring for what each bounds).

    Args:
        fit_seconds: Seconds of model fitting one Ask may take (and the most ``lcm.timeout``).
        starts: The most L-BFGS starts of a fit.
        iterations: The most L-BFGS iterations of a start.
        screen: The most random candidates screened per start.
        fit_samples: The most samples hyperparameters are fitted on.
        exact_samples: The most samples of an exact posterior.
        latent: The most latent functions (and rank) of an LCM.
        candidates: The most points an acquisition search scores, or configurations listed.
        initial: The largest initial design per task.
        tasks: The most tasks of a session.
    """

    fit_seconds: float = 2.0
    starts: int = 8
    iterations: int = 500
    screen: int = 16
    fit_samples: int = 1000
    exact_samples: int = 2000
    latent: int = 8
    candidates: int = 20000
    initial: int = 200
    tasks: int = 100

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            kind = float if item.name == "fit_seconds" else int
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float) if kind is float else int)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise InvalidInputError(
                    f"--limit {item.name}", f"{value!r} is not a positive {'number' if kind is float else 'integer'}"
                )
        object.__setattr__(self, "fit_seconds", float(self.fit_seconds))

    @classmethod
    def parse(cls, pairs: Iterable[str]) -> SessionLimits:
        """The defaults with the ``NAME=VALUE`` pairs given (``raytuner serve --limit``) instead.

        Args:
            pairs: ``NAME=VALUE`` strings; a later one of a name wins.
        """
        names = [f.name for f in fields(cls)]
        given: dict[str, Any] = {}
        for pair in pairs:
            name, sep, text = pair.partition("=")
            name = name.strip()
            if not sep:
                raise InvalidInputError("--limit", f"{pair!r} is not NAME=VALUE", allowed=names)
            if name not in names:
                raise InvalidInputError("--limit", f"unknown limit {name!r}", allowed=names)
            try:
                given[name] = float(text) if name == "fit_seconds" else int(text)
            except ValueError:
                raise InvalidInputError(f"--limit {name}", f"{text!r} is not a positive number") from None
        return replace(cls(), **given)

    def check(self, options: Mapping[str, Any], tasks: int) -> None:
        """Refuse ``options`` (an engine's, as a client gave them) or a task count over these limits.

        The options have the same names in every engine. Values of the wrong kind are left to the
        engine, which refuses them naming the option.

        Args:
            options: The engine options (``lcm`` as plain data; ``options``, its former name, too).
            tasks: How many tasks the session tunes.

        Raises:
            InvalidInputError: One line naming the option, the limit and the value.
        """
        if tasks > self.tasks:
            self._refuse("tasks_json", f"{tasks} tasks", "tasks")
        lcm = options.get("lcm", options.get("options"))
        values: dict[str, Any] = {k: options[k] for k in ("n_initial", "search_candidates") if k in options}
        if isinstance(lcm, Mapping):
            values.update({f"lcm.{k}": v for k, v in lcm.items()})
        for option, limit in _BOUNDED:
            if option not in values:
                continue
            value = values[option]
            if value is None and option in _NULL_IS_UNBOUNDED:
                self._refuse(f"options.{option}", "null (no limit)", limit)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > getattr(self, limit):
                self._refuse(f"options.{option}", repr(value), limit)
        listed = options.get("candidates")
        if isinstance(listed, (list, tuple)) and len(listed) > self.candidates:
            self._refuse("options.candidates", f"a list of {len(listed)}", "candidates")

    def _refuse(self, field: str, what: str, limit: str) -> None:
        value = getattr(self, limit)
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        raise InvalidInputError(
            field, f"{what} is over this server's limit {limit}={shown} (raytuner serve --limit {limit}=N)"
        )
