"""Trial leases: how long a handed-out trial stays its job's without a word from it.

A session with a lease time (``lease_seconds``) gives each trial it hands out a
lease; the job renews it while it runs (a heartbeat, or asking again with the
same trial id). A trial whose lease ends is *expired*: the session hands out
its task and configuration again, under a new trial id, so a job that died
never stalls the session. :class:`Leases` keeps the deadlines on the
process's monotonic clock (a wall-clock step never ends or extends a lease);
a restarted server gives the trials in flight a full lease from its start, as
no heartbeat could reach it while it was down.

Example:
    >>> leases = Leases(60.0)
    >>> 59.0 < leases.grant("a1") <= 60.0
    True
    >>> leases.due(), Leases(0).grant("a1")      # 0 seconds: leases never end
    ([], None)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from raytuner.errors import InvalidInputError

__all__ = ["Leases", "DEFAULT_LEASE_SECONDS", "MAX_LEASE_SECONDS", "check_lease_seconds"]

#: A session's lease time when its creator names none: five minutes. A job renews every minute
#: (``examples/remote_hpc_job/job.sh``, ``RemoteTuner.run``), so four lost heartbeats or a server
#: restart waited out by the client's retries cost nothing, while the trial of a job that was killed
#: (``scancel``, a node failure, the allocation's time limit) is handed out again within five minutes:
#: little against HPC trials of minutes to hours.
DEFAULT_LEASE_SECONDS = 300.0
#: The longest lease time a session may have: a week.
MAX_LEASE_SECONDS = 7 * 24 * 3600.0
#: The shortest non-zero lease time (tests use 1-2 s).
MIN_LEASE_SECONDS = 1.0


def check_lease_seconds(value: object, field: str = "lease_seconds") -> float:
    """``value`` as a lease time in seconds: 0 (trials never expire) or 1 to a week.

    Args:
        value: The lease time given.
        field: The field's name in the error.

    Raises:
        InvalidInputError: Not a number in range.

    >>> check_lease_seconds(90)
    90.0
    >>> check_lease_seconds(-1)
    Traceback (most recent call last):
    raytuner.errors.InvalidInputError: lease_seconds: -1 is not a lease time; allowed: 0 (trials never expire) or 1 to 604800 seconds
    """
    allowed = f"0 (trials never expire) or {MIN_LEASE_SECONDS:g} to {MAX_LEASE_SECONDS:g} seconds"
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    if not (number == 0 or MIN_LEASE_SECONDS <= number <= MAX_LEASE_SECONDS):
        raise InvalidInputError(field, f"{str(value)[:40]} is not a lease time; allowed: {allowed}")
    return number


class Leases:
    """The lease deadlines of a session's trials in flight, on a monotonic clock.

    Args:
        seconds: The lease time (0: no lease ever ends; :meth:`grant` answers ``None``).
        clock: The monotonic clock (seconds).
    """

    def __init__(self, seconds: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = check_lease_seconds(seconds)
        self._clock = clock
        self._deadlines: dict[str, float] = {}

    def grant(self, trial_id: str) -> float | None:
        """Lease ``trial_id`` for a full lease time from now (a new lease or a renewal); returns the seconds left.

        Args:
            trial_id: The trial.
        """
        if not self.seconds:
            return None
        self._deadlines[trial_id] = self._clock() + self.seconds
        return self.seconds

    def remaining(self, trial_id: str) -> float | None:
        """Seconds left of ``trial_id``'s lease (``None``: it has none that ends).

        Args:
            trial_id: The trial.
        """
        deadline = self._deadlines.get(trial_id)
        return None if deadline is None else max(0.0, deadline - self._clock())

    def drop(self, trial_id: str) -> None:
        """Forget ``trial_id``'s lease (it was told, or it expired).

        Args:
            trial_id: The trial.
        """
        self._deadlines.pop(trial_id, None)

    def due(self) -> list[str]:
        """The trials whose lease has ended, earliest first (they stay here until dropped)."""
        now = self._clock()
        return sorted((t for t, d in self._deadlines.items() if d <= now), key=self._deadlines.__getitem__)
