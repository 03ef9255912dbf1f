"""The gRPC servers: the tuning service that remote HPC jobs ask and tell, and the crowd repository.

- :class:`~raytuner.service.server.TuningServer` serves ``raytuner.v1.TuningService``
  (``protos/raytuner/protocol/v1/tuning.proto``) over a history store;
- its clients are in :mod:`raytuner.client`, its commands in :mod:`raytuner.cli`.

The server imports gRPC; import it from its module
(``from raytuner.service.server import TuningServer``) or from here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TuningServer"]


def __getattr__(name: str) -> Any:
    if name == "TuningServer":
        from raytuner.service.server import TuningServer

        return TuningServer
    raise AttributeError(name)
