"""The gRPC bridge: a tuning service that remote HPC jobs ask and tell.

- :class:`~raytuner.service.server.TuningServer` serves ``raytuner.v1.TuningService``
  (``protos/raytuner/service/v1/tuning.proto``) over a history store;
- :class:`~raytuner.service.client.RemoteTuner` is its Python client;
- ``raytuner serve``, ``raytuner session …``, ``raytuner ask`` and ``raytuner tell``
  are the command-line faces.

The server and the client import gRPC; import them from their modules
(``from raytuner.service.server import TuningServer``) or from here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TuningServer", "RemoteTuner"]


def __getattr__(name: str) -> Any:
    if name == "TuningServer":
        from raytuner.service.server import TuningServer  # noqa: PLC0415

        return TuningServer
    if name == "RemoteTuner":
        from raytuner.service.client import RemoteTuner  # noqa: PLC0415

        return RemoteTuner
    raise AttributeError(name)
