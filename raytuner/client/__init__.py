"""Clients of raytuner's gRPC services (they import gRPC).

- :class:`~raytuner.client.remote.RemoteTuner`: ask and tell a tuning
  session on a :class:`~raytuner.service.server.TuningServer`;
- :class:`~raytuner.client.crowd.CrowdClient`: the shared crowd repository;
- :class:`~raytuner.client.source.RemoteSource`: transfer-learning source
  data read through the service.

>>> from raytuner.client import CrowdClient, RemoteSource, RemoteTuner

Each is imported on first use, so ``raytuner.client.remote`` (what ``raytuner
ask`` and ``tell`` need) loads without the crowd client's models and analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytuner.lazy import lazy_names

if TYPE_CHECKING:
    from raytuner.client.crowd import CrowdClient
    from raytuner.client.remote import RemoteTuner
    from raytuner.client.source import RemoteSource

__all__ = ["RemoteTuner", "CrowdClient", "RemoteSource"]

_MODULES = {
    "RemoteTuner": "raytuner.client.remote",
    "CrowdClient": "raytuner.client.crowd",
    "RemoteSource": "raytuner.client.source",
}

__getattr__, __dir__ = lazy_names(__name__, _MODULES)
