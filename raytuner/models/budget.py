"""A time budget for the model fits of one piece of work (a service's Ask), over every fit it makes.

An engine may fit several models for one suggestion (a shared LCM, a task's
own model, one per objective); :attr:`LCMOptions.timeout
<raytuner.models.LCMOptions.timeout>` bounds each fit alone. A caller that
must answer in bounded time (the tuning service answering an Ask) wraps the
work in :func:`fit_budget`: every :class:`~raytuner.models.LCM` fit inside
the ``with`` block, in this thread, stops at the budget's deadline too,
keeping the best hyperparameters found so far (a fit that starts past it
optimises its first start for one step, without screening random ones). A
budget never shortens itself: nested budgets keep the earlier deadline.

Example:
    >>> import time
    >>> deadline(60.0) > time.time() + 59
    True
    >>> with fit_budget(2.0):
    ...     deadline(60.0) < time.time() + 3
    True
    >>> remaining() is None
    True
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["fit_budget", "deadline", "remaining"]

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("raytuner_fit_deadline", default=None)


@contextmanager
def fit_budget(seconds: float | None) -> Iterator[float | None]:
    """Bound every model fit in the ``with`` block (this thread) to end within ``seconds`` from now.

    Yields the deadline (``time.time()`` seconds; ``None``: no budget).

    Args:
        seconds: The budget (``None``: none; an enclosing budget still holds).
    """
    outer = _DEADLINE.get()
    mine = None if seconds is None else time.time() + seconds
    chosen = mine if outer is None else outer if mine is None else min(outer, mine)
    token = _DEADLINE.set(chosen)
    try:
        yield chosen
    finally:
        _DEADLINE.reset(token)


def deadline(seconds: float) -> float:
    """When a fit allowed ``seconds`` of its own must stop: that, or the enclosing budget's end if sooner.

    Args:
        seconds: The fit's own limit (``LCMOptions.timeout``).
    """
    own = time.time() + seconds
    budget = _DEADLINE.get()
    return own if budget is None else min(own, budget)


def remaining() -> float | None:
    """Seconds left of the enclosing budget (at least 0), or ``None`` outside one."""
    budget = _DEADLINE.get()
    return None if budget is None else max(0.0, budget - time.time())
