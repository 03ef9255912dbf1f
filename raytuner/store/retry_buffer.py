"""Records on their way to a destination that may be down: kept when a send fails, sent again with the next ones.

The Ray Tune callback that feeds the tuning service
(:class:`raytuner.searchers.ServiceCallback`) and the store that syncs to the
crowd repository (:class:`raytuner.crowd.sync.CrowdSyncStore`) both upload
records as they are made; neither may stop tuning because the other end is
unreachable, and neither may lose a record. A :class:`RetryBuffer` keeps the
records of each problem until one send of all of them succeeds (the
destinations are idempotent by uid, so a record sent twice is harmless). It
holds no lock: a caller with threads holds its own around it.

Example:
    >>> outbox = []
    >>> def upload(problem, records):
    ...     if not outbox:                      # the first try fails: the destination is down
    ...         outbox.append(None)
    ...         raise ConnectionError("down")
    ...     outbox.extend(records)
    >>> buffer = RetryBuffer(upload, "the demo service")
    >>> buffer.add("demo", ["r1"])
    >>> buffer.send("demo"), buffer.waiting(), buffer.sent
    (False, 1, 0)
    >>> buffer.add("demo", ["r2"])
    >>> buffer.send("demo"), buffer.waiting(), buffer.sent, outbox[1:]
    (True, 0, 2, ['r1', 'r2'])
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

__all__ = ["RetryBuffer"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class RetryBuffer(Generic[T]):
    """Each problem's records that have not reached the destination yet.

    Args:
        send: ``send(problem, records)`` uploads ``records`` of ``problem``;
            it raises when they did not all arrive.
        destination: the destination as the log names it ("the tuning service").
    """

    def __init__(self, send: Callable[[str, list[T]], Any], destination: str) -> None:
        self._send = send
        self.destination = destination
        self._waiting: dict[str, list[T]] = {}
        self.sent = 0

    def __repr__(self) -> str:
        return f"RetryBuffer({self.destination!r}, waiting={self.waiting()})"

    def add(self, problem: str, records: Iterable[T]) -> None:
        """Keep ``records`` of ``problem`` until they are sent.

        Args:
            problem: the tuning problem's name.
            records: the records to send.
        """
        self._waiting.setdefault(problem, []).extend(records)

    def records(self, problem: str) -> list[T]:
        """The records of ``problem`` waiting to be sent, oldest first.

        Args:
            problem: the tuning problem's name.
        """
        return list(self._waiting.get(problem, ()))

    def waiting(self) -> int:
        """How many records of all problems are waiting."""
        return sum(len(records) for records in self._waiting.values())

    def send(self, problem: str) -> bool:
        """Send every waiting record of ``problem`` at once; whether none is left waiting.

        A failed send is logged as a warning and keeps the records; it never raises.

        Args:
            problem: the tuning problem's name.
        """
        records = self._waiting.get(problem)
        if not records:
            return True
        try:
            self._send(problem, list(records))
        except Exception as exc:  # tuning goes on; the records are sent again later
            log.warning(
                "could not upload %d record(s) of %s to %s (%s); will retry",
                len(records),
                problem,
                self.destination,
                exc,
            )
            return False
        log.debug("uploaded %d record(s) of %s to %s", len(records), problem, self.destination)
        self.sent += len(records)
        del self._waiting[problem]
        return True

    def send_all(self) -> int:
        """:meth:`send` every problem's records; returns how many are still waiting."""
        for problem in list(self._waiting):
            self.send(problem)
        return self.waiting()
