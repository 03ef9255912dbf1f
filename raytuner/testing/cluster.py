"""A multi-node Ray cluster on this one machine, for examples and tests of cluster runs.

:class:`LocalCluster` starts a head node (``ray start --head``) and worker
nodes (``ray start --address=...``), each with its own CPUs and a custom
resource naming it, as separate process groups; :meth:`LocalCluster.stop`
ends every process it started, and nothing else. Ray 2.60 enables token
authentication for ``ray start``: the cluster writes a fresh token to a
private file and exports ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH``
so that the nodes and this process's ``ray.init(address=...)`` use it.

Example:
    >>> with LocalCluster(nodes=[1, 1]) as cluster:          # doctest: +SKIP
    ...     import ray
    ...     ray.init(address=cluster.address)
    ...     len(ray.nodes())
    2
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from raytuner.errors import InvalidInputError, RaytunerError

__all__ = ["LocalCluster"]

log = logging.getLogger(__name__)

_RESOURCE = "raytuner_node_"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_cli() -> str:
    beside = Path(sys.executable).with_name("ray")
    found = str(beside) if beside.exists() else shutil.which("ray")
    if not found:
        raise RaytunerError("the `ray` command is not installed beside this Python nor on PATH")
    return found


def _refresh_ray_config() -> None:
    """Make an already imported Ray see the authentication variables (it caches its config at import)."""
    if "ray" in sys.modules:
        # Ray's own refresh, as ray.init does for token mode (Ray's _raylet.pyi leaves out the Config _raylet has)
        from ray._raylet import Config  # type: ignore[attr-defined]

        Config.initialize("")


class LocalCluster:
    """Head plus worker nodes on this machine; ``nodes[i]`` is node ``i``'s CPU count (node 0 is the head).

    Node ``i`` also carries the custom resource ``raytuner_node_<i>``, so
    work can be pinned to a node. ``timeout`` bounds the wait for the nodes to join.

    Args:
        nodes: each node's CPU count, the head first (default two nodes of one CPU).
        timeout: seconds to wait for the nodes to join (default 60).
    """

    def __init__(self, nodes: Sequence[int] = (1, 1), timeout: float = 60.0) -> None:
        if not nodes or any(not isinstance(n, int) or n < 0 for n in nodes):
            raise InvalidInputError("nodes", f"a list of CPU counts (integers >= 0), got {list(nodes)!r}")
        self.cpus = list(nodes)
        self.timeout = timeout
        self.address = ""
        self._dir = Path(tempfile.mkdtemp(prefix="raytuner-cluster-"))
        self._processes: list[subprocess.Popen[bytes]] = []
        self._saved_env: dict[str, str | None] = {}

    def _env(self) -> dict[str, str]:
        token = self._dir / "auth_token"
        if not token.exists():
            token.write_text(secrets.token_hex(32))
            token.chmod(0o600)
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}

    def _start_node(self, index: int, args: list[str]) -> None:
        logfile = open(self._dir / f"node_{index}.log", "wb")  # closed with the process
        command = [
            _ray_cli(),
            "start",
            *args,
            f"--num-cpus={self.cpus[index]}",
            f'--resources={{"{_RESOURCE}{index}": 1}}',
            "--disable-usage-stats",
            "--block",
        ]
        self._processes.append(
            subprocess.Popen(
                command,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self._env()},
                start_new_session=True,
            )
        )

    def start(self) -> str:
        """Start every node and wait until all have joined; returns the cluster address."""
        for key, value in self._env().items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        _refresh_ray_config()
        port = _free_port()
        self.address = f"127.0.0.1:{port}"
        self._start_node(0, ["--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--include-dashboard=false"])
        self._wait_for_head(port)  # a socket check: each `ray status` costs seconds of Python start-up
        for index in range(1, len(self.cpus)):
            self._start_node(index, [f"--address={self.address}", "--node-ip-address=127.0.0.1"])
        self._wait(len(self.cpus))
        log.info("local Ray cluster of %d nodes at %s", len(self.cpus), self.address)
        return self.address

    def _wait_for_head(self, port: int) -> None:
        """Wait until the head's GCS accepts connections (the other nodes join through it)."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self._processes[0].poll() is not None:
                raise RaytunerError(f"the head node exited while starting; see the logs in {self._dir}")
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        raise RaytunerError(f"the head node did not come up within {self.timeout:.0f} s; logs in {self._dir}")

    def _wait(self, count: int) -> None:
        """Wait until ``count`` nodes are alive (``ray status`` lists them)."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self._processes):
                raise RaytunerError(f"a Ray node exited while starting; see the logs in {self._dir}")
            status = subprocess.run(
                [_ray_cli(), "status", f"--address={self.address}"],
                capture_output=True,
                text=True,
                env={**os.environ, **self._env()},
                timeout=self.timeout,
            )
            joined = {i for i in range(len(self.cpus)) if f"{_RESOURCE}{i}" in status.stdout}
            if status.returncode == 0 and len(joined) >= count:
                return
            time.sleep(1.0)
        raise RaytunerError(f"{count} Ray nodes did not come up within {self.timeout:.0f} s; logs in {self._dir}")

    def stop(self) -> None:
        """End every process the nodes started (each node is its own process group).

        A node gets a second to end on SIGTERM, then SIGKILL: Ray's daemons here outlived SIGTERM by 6 s
        and more (a 10 s grace cost every stop 10 s), and a throwaway cluster keeps nothing worth a grace.
        """
        for process in reversed(self._processes):
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        deadline = time.monotonic() + 1.0
        for process in reversed(self._processes):
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:  # the node's daemons (raylet, GCS) outlive `ray start` unless the group is killed
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
        self._processes.clear()
        self._forget_address()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        _refresh_ray_config()

    def _forget_address(self) -> None:
        """Remove Ray's note of the latest ``ray start`` (as ``ray stop`` does) when it names this cluster.

        Left behind, it makes every later plain ``ray.init(num_cpus=...)`` on
        this machine try to join the stopped cluster and fail.
        """
        if not self.address:
            return
        from ray._common.utils import get_ray_address_file  # Ray's own path for the note

        note = Path(get_ray_address_file(None))
        try:
            if note.read_text().strip().rsplit(":", 1)[-1] == self.address.rsplit(":", 1)[-1]:
                note.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
