"""Tuning servers in processes of their own, and client threads that start together.

A server runs as ``python -m benchmarks.server_process raytuner|optuna
...`` and prints one JSON line (its port, and for raytuner the API key it
made) before it serves; :class:`ServerProcess` starts one and reads that
line. :func:`drive_clients` runs client threads that warm up, wait for each
other on a barrier, then time their round trips. The benchmark
(:mod:`benchmarks.service`) and the service's kill -9 tests (``tests/``) use both.

Example:
    >>> cell = drive_clients(2, lambda index: lambda i: None, warmup=1, rounds=3, timeout=10)
    >>> cell.tells, len(cell.latencies)
    (6, 6)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ServerProcess", "Cell", "drive_clients", "main"]


# -- servers in processes of their own -------------------------------------------------------------------


def _python_env() -> dict[str, str]:
    """The environment of a server process: this interpreter's import path, so an uninstalled checkout works."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class ServerProcess:
    """A server started with ``python -m benchmarks.server_process SERVER ...``: its first stdout line is JSON.

    The benchmark's servers and the service's kill -9 tests run in these.

    Args:
        args: the server's arguments (see :func:`main`).
        log_path: where the server's stderr goes (appended).
        timeout: seconds to wait for the server's first line.

    Raises:
        RuntimeError: the server printed no line in ``timeout`` seconds (the log's end is in the message).
    """

    def __init__(self, args: Sequence[str], log_path: Path, timeout: float = 60.0) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # closed in stop()
        from raytuner.testing.mongod import death_signal_prefix

        # the kernel stops the server should this process die (see death_signal_prefix)
        command = [*death_signal_prefix(), sys.executable, "-m", "benchmarks.server_process", *args]
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log, env=_python_env()
        )
        self.info = self._first_line(timeout)

    def _first_line(self, timeout: float) -> dict[str, Any]:
        stdout = self.process.stdout
        assert stdout is not None
        found: list[str] = []
        reader = threading.Thread(target=lambda: found.append(stdout.readline().decode()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not found or not found[0].strip():
            self.stop()
            tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
            raise RuntimeError(f"server {self.process.args!r} did not start; its log ends:\n{tail}")
        info: dict[str, Any] = json.loads(found[0])
        return info

    def kill(self) -> None:
        """``kill -9`` the server, as a crash or the out-of-memory killer would."""
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        """Terminate the server (kill it after 10 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()


def _serve_raytuner(store: str, port: int, workers: int, key_name: str | None) -> None:
    from raytuner.service.server import TuningServer

    server = TuningServer(store, port=port, auth=True, max_workers=workers)
    bound = server.start()
    key = server.keys.create(key_name) if key_name else ""
    sys.stdout.write(json.dumps({"port": bound, "key": key}) + "\n")
    sys.stdout.flush()
    _wait_for_sigterm(lambda: server.stop(grace=0.5))


def _serve_optuna(url: str, port: int, workers: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import optuna
    from optuna.storages import get_storage, run_grpc_proxy_server

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    storage = get_storage(url)
    # get_storage types its _CachedStorage as a BaseStorage, which has no _backend
    engine = storage._backend.engine  # type: ignore[attr-defined]  # the SQLite settings it commits with
    with engine.connect() as connection:
        synchronous = connection.exec_driver_sql("PRAGMA synchronous").scalar()
        journal = connection.exec_driver_sql("PRAGMA journal_mode").scalar()
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    sys.stdout.write(
        json.dumps(
            {
                "port": port,
                "sqlite_synchronous": names.get(synchronous, str(synchronous)),
                "sqlite_journal_mode": str(journal),
            }
        )
        + "\n"
    )
    sys.stdout.flush()
    run_grpc_proxy_server(storage, host="127.0.0.1", port=port, thread_pool=ThreadPoolExecutor(workers))


def _wait_for_sigterm(stop: Callable[[], None]) -> None:
    import signal

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    stop()


def main(argv: Sequence[str] | None = None) -> None:
    """Entry of the server processes: ``python -m benchmarks.server_process raytuner|optuna ...``.

    Args:
        argv: the arguments (``None``: ``sys.argv[1:]``): the server, ``--store``,
            ``--port``, ``--workers`` and, for raytuner, ``--key-name``.
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server_process")
    parser.add_argument("server", choices=["raytuner", "optuna"])
    parser.add_argument("--store", required=True, help="raytuner: store directory; optuna: storage URL")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--key-name", help="raytuner: create an API key for this name and print it")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.server == "raytuner":
        _serve_raytuner(args.store, args.port, args.workers, args.key_name)
    else:
        _serve_optuna(args.store, args.port, args.workers)


@dataclass
class Cell:
    """Latencies (ms), wall time (s) and acknowledged tells of one cell's measured phase."""

    latencies: list[float]
    wall_s: float
    tells: int


def drive_clients(
    clients: int, make_loop: Callable[[int], Callable[[int], Any]], warmup: int, rounds: int, timeout: float
) -> Cell:
    """Run ``clients`` threads: each builds its loop, warms up, waits for the others, then measures ``rounds``.

    Args:
        clients: how many client threads.
        make_loop: ``make_loop(index)`` builds client ``index``'s step; ``step(i)`` makes round trip ``i``.
        warmup: round trips per client before the barrier (not timed).
        rounds: timed round trips per client.
        timeout: seconds to wait for the barrier and for each thread.

    Raises:
        RuntimeError: a client failed (the first error is the cause) or did not finish in time.
    """
    barrier = threading.Barrier(clients + 1)
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []

    def client(index: int) -> None:
        try:
            step = make_loop(index)
            for i in range(warmup):
                step(i)
            barrier.wait(timeout)
            mine = latencies[index]
            for i in range(rounds):
                started = time.perf_counter()
                step(warmup + i)
                mine.append((time.perf_counter() - started) * 1000.0)
        except BaseException as exc:  # reported by the driver
            errors.append(exc)
            barrier.abort()

    threads = [
        threading.Thread(target=client, args=(i,), name=f"bench-client-{i}", daemon=True) for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    try:
        barrier.wait(timeout)
    except threading.BrokenBarrierError:
        pass
    started = time.perf_counter()
    for thread in threads:
        thread.join(timeout)
    wall = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"a benchmark client failed: {errors[0]!r}") from errors[0]
    if any(thread.is_alive() for thread in threads):
        raise RuntimeError(f"benchmark clients did not finish within {timeout:g} s")
    merged = [x for mine in latencies for x in mine]
    return Cell(latencies=merged, wall_s=wall, tells=len(merged))


if __name__ == "__main__":
    main()
