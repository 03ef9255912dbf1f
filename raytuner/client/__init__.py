"""Clients of raytuner's gRPC services (they import gRPC).

- :class:`~raytuner.client.remote.RemoteTuner`: ask and tell a tuning
  session on a :class:`~raytuner.service.server.TuningServer`;
- :class:`~raytuner.client.crowd.CrowdClient`: the shared crowd repository;
- :class:`~raytuner.client.source.RemoteSource`: transfer-learning source
  data read through the service.

>>> from raytuner.client import CrowdClient, RemoteSource, RemoteTuner
"""

from raytuner.client.crowd import CrowdClient
from raytuner.client.remote import RemoteTuner
from raytuner.client.source import RemoteSource

__all__ = ["RemoteTuner", "CrowdClient", "RemoteSource"]
