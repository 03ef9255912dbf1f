"""The context manager every local harness shares: ``with`` starts it, leaving the block stops it.

A harness (:class:`~raytuner.testing.mongod.LocalMongod`,
:class:`~raytuner.testing.slurm.LocalSlurm`) subclasses :class:`Harness`
and defines :meth:`~Harness.start` (returning itself) and
:meth:`~Harness.stop`.

>>> class Light(Harness):
...     on = False
...     def start(self):
...         self.on = True
...         return self
...     def stop(self):
...         self.on = False
>>> with Light() as light:
...     light.on
True
>>> light.on
False
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

__all__ = ["Harness"]


class Harness(ABC):
    """Something a test starts and stops; ``with harness:`` calls :meth:`start`, then :meth:`stop` at the end."""

    @abstractmethod
    def start(self) -> Self:
        """Start it and return it."""

    @abstractmethod
    def stop(self) -> None:
        """Stop it (stopping a stopped one does nothing)."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
