"""One tuning server per store: the JSON store's lock file and MongoDB's lease document.

A tuning server keeps its sessions (pending trials, budgets) in memory and
in the store's ledger; a second server on the same store would hand out the
same sessions' trials again and acknowledge tells the first one never sees.
So a server holds its store's :class:`ServerLock` for as long as it runs,
and a second server refuses to start with :class:`StoreInUse`: one line
naming the first (host, pid, since when).

- :class:`FileServerLock` (a JSON store): an exclusive ``flock`` on
  ``DIR/.service/server.lock``, which holds the holder's host, pid and start.
  The operating system releases it when the process ends, however it ends, so
  a server killed with ``kill -9`` never blocks its restart.
- :class:`MongoServerLease` (MongoDB): the document ``{_id: "server"}`` of the
  collection ``service_server`` of the store's database, with the holder's
  host, pid, start and an expiry that the running server renews every
  :attr:`~MongoServerLease.renew_every` seconds. It is taken atomically
  (one conditional ``find_one_and_update``, an upsert on ``_id``) and every time is the
  database's (``$$NOW``), never a client's. A stopped server deletes it; a
  killed one is taken over at once by a server started on the same host (its
  pid is gone), and from another host once the lease has run out (``ttl``
  seconds after the last renewal; a starting server waits for that when the
  holder has stopped renewing). A server that finds its lease taken is told
  through ``on_lost`` and must stop.

When the database cannot be reached (mongod restarting, a network cut) the
lease cannot be renewed, and once it may run out before the next try (not
renewed for ``ttl - renew_every`` seconds) the lease is :attr:`~ServerLock.paused`:
the server answers no call that needs the store (its callers retry) and
writes nothing, since another server may take the store from then on. The
renewing thread keeps trying. When the database answers again, the lease is
taken back only when its document still carries this lease's token (every
other taker writes its own, journaled): nobody took the store meanwhile, the
server's sessions in memory are still the store's, and it serves on. If the
document carries another token, or is gone (another server may have taken it,
served and released it), the lease is lost (``on_lost``). A document gone
while the lease had not run out (a database restored without it: no other
server can have taken it by expiry) is taken again. The pause and the resume
are logged as warnings, with how long the pause lasted.

Only servers take it: readers (``raytuner history``, the dashboard), key
commands and tuning runs in Python or Ray write the store beside a server as
before (appends and ledger lines are atomic on both stores), since they keep
no service session.

Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> first = FileServerLock(directory)
    >>> first.acquire()
    >>> try:
    ...     FileServerLock(directory).acquire()
    ... except StoreInUse as exc:
    ...     print(exc.field, exc.holder["pid"] == os.getpid(), "served by another raytuner server" in str(exc))
    store True True
    >>> first.release()
    >>> again = FileServerLock(directory)
    >>> again.acquire()
    >>> again.release()
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import socket
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from raytuner.errors import InvalidInputError

__all__ = ["ServerLock", "FileServerLock", "MongoServerLease", "StoreInUse", "LEASE_TTL", "LEASE_COLLECTION"]

log = logging.getLogger(__name__)

#: Seconds a MongoDB lease lasts after its last renewal (a crashed server elsewhere blocks a restart this long).
LEASE_TTL = 10.0
#: The collection of the MongoDB lease document.
LEASE_COLLECTION = "service_server"
_LEASE_ID = "server"


class StoreInUse(InvalidInputError):
    """A second server on a store: the message names the first one (host, pid, since when).

    Args:
        store: The store, as shown to the user.
        holder: The first server's ``host``, ``pid`` and ``since`` (what it wrote; missing keys are unknown).
        hint: What to do about it (default: stop it, or serve another store).
    """

    def __init__(self, store: str, holder: dict[str, Any], hint: str = "") -> None:
        self.holder = holder
        who = ", ".join(f"{key} {holder.get(key, 'unknown')}" for key in ("host", "pid", "since"))
        super().__init__(
            "store",
            f"{store} is served by another raytuner server ({who}); "
            + (hint or "stop it first, or serve another store (one server per store)"),
        )


def _process_start(pid: int) -> str | None:
    """This boot's id and the start time of process ``pid`` (tells a reused pid apart); None when it is gone.

    On systems without ``/proc`` the pid alone is checked (``""`` when it is alive).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None  # a Linux without this process
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # alive, another user's
        return ""
    # the command name (field 2) may hold spaces and parentheses: count fields after its last ')'
    fields = stat[stat.rindex(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):
        return None  # ended, not yet reaped by its parent
    return f"{boot}:{fields[19].decode()}"


def _holder() -> dict[str, Any]:
    """Who this process is, for a lock or lease it takes."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "process": _process_start(os.getpid())}


def _gone(holder: dict[str, Any]) -> bool:
    """Whether ``holder`` was a process on this host that has ended (a killed server)."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    now = _process_start(holder["pid"])
    return now is None or (bool(now) and bool(holder.get("process")) and now != holder["process"])


class ServerLock(ABC):
    """What a tuning server holds on its store while it runs; :meth:`acquire` refuses a second one."""

    @abstractmethod
    def acquire(self) -> None:
        """Take the store for this process.

        Raises:
            StoreInUse: another server holds it (the message names it).
        """

    @abstractmethod
    def release(self) -> None:
        """Give the store back (a lock not held is left as it is)."""

    @property
    def paused(self) -> bool:
        """Whether the server must not use the store now: its hold may have run out (a MongoDB lease that
        the database could not renew); it clears by itself once the hold is renewed. A lock file never pauses."""
        return False


class FileServerLock(ServerLock):
    """A JSON store's server lock: ``flock`` on ``DIR/.service/server.lock``, held until :meth:`release` or exit.

    Args:
        directory: The store directory.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / ".service" / "server.lock"
        self._fd: int | None = None

    def __repr__(self) -> str:
        return f"FileServerLock({str(self.directory)!r})"

    def acquire(self) -> None:
        """Take the lock file's exclusive ``flock`` and write who holds it; :class:`StoreInUse` when taken."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise StoreInUse(str(self.directory), self._read_holder()) from None
            except OSError as exc:  # a file system without flock (Lustre mounted without -o flock, ...)
                os.close(fd)
                raise InvalidInputError(
                    "store",
                    f"{self.path}: cannot lock it ({exc.strerror or exc}); one server per store needs a file "
                    "system with flock (on a cluster: one that locks across nodes), or serve a MongoDB store",
                ) from None
            try:
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)  # the holder removed it as we opened it: take the one there now
        holder = {**_holder(), "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        data = (json.dumps(holder) + "\n").encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        with suppress(OSError):  # who holds it is for messages only: the lock is the flock
            os.fsync(fd)
        self._fd = fd

    def _read_holder(self) -> dict[str, Any]:
        try:
            holder = json.loads(self.path.read_bytes() or b"{}")
        except (OSError, ValueError):
            return {}
        return holder if isinstance(holder, dict) else {}

    def release(self) -> None:
        """Remove the lock file and close it (closing releases the ``flock``)."""
        if self._fd is None:
            return
        with suppress(OSError):
            self.path.unlink()  # one waiting on the removed file notices (its inode is gone) and retries
        os.close(self._fd)
        self._fd = None


class MongoServerLease(ServerLock):
    """A MongoDB store's server lease: a document renewed by a background thread, expiring by the database's clock.

    Args:
        collection: The lease's collection (pymongo ``Collection``, journaled write concern).
        store: The store as shown to the user (for messages).
        errors: The store's error mapping (driver errors become :class:`~raytuner.errors.StoreError`).
        on_lost: Called (from the renewing thread, with a message) when the lease was taken by another server,
            or is gone after it may have run out.
        ttl: Seconds the lease lasts after a renewal (default :data:`LEASE_TTL`).
    """

    def __init__(
        self,
        collection: Any,
        store: str,
        errors: Callable[[str], AbstractContextManager[None]],
        on_lost: Callable[[str], None] | None = None,
        ttl: float = LEASE_TTL,
    ) -> None:
        self.collection = collection
        self.store = store
        self.errors = errors
        self.on_lost = on_lost
        self.ttl = ttl
        #: Seconds between renewals: a lease survives a few failed ones.
        self.renew_every = ttl / 5
        self.token = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # by the monotonic clock: when the lease may run out before the next renewal (then it pauses)
        self._valid_until = -math.inf
        self._paused_since: float | None = None  # the pause the renewing thread logged

    def __repr__(self) -> str:
        return f"MongoServerLease({self.store!r})"

    def _take(self, when: dict[str, Any]) -> bool:
        """Become the holder if the lease document is missing or ``when`` (an expression on it) is true.

        One ``find_one_and_update`` upserting ``{_id: "server"}``: every field keeps its value unless the
        condition holds, evaluated on the document as it was, so two servers cannot both take it.
        """
        from pymongo import ReturnDocument  # pymongo only with MongoDB

        condition = {"$or": [{"$eq": [{"$type": "$token"}, "missing"]}, when]}
        mine = {key: {"$literal": value} for key, value in {**_holder(), "token": self.token}.items()}
        values = {**mine, "since": "$$NOW", "expires": {"$add": ["$$NOW", int(self.ttl * 1000)]}}
        update = [{"$set": {key: {"$cond": [condition, value, f"${key}"]} for key, value in values.items()}}]
        with self.errors("take the server lease"):
            taken = self.collection.find_one_and_update(
                {"_id": _LEASE_ID}, update, upsert=True, return_document=ReturnDocument.AFTER
            )
        return taken is not None and taken.get("token") == self.token

    def _current(self) -> dict[str, Any] | None:
        """The lease document with ``left``: milliseconds until it expires, by the database's clock."""
        with self.errors("read the server lease"):
            found = list(
                self.collection.aggregate(
                    [{"$match": {"_id": _LEASE_ID}}, {"$addFields": {"left": {"$subtract": ["$expires", "$$NOW"]}}}]
                )
            )
        return found[0] if found else None

    def acquire(self) -> None:
        """Take the lease (see the module documentation) and start renewing it; :class:`StoreInUse` when held."""
        deadline = time.monotonic() + self.ttl * 2
        while True:
            asked = time.monotonic()  # the database takes it at or after this: it lasts ttl from it
            if self._take({"$lt": ["$expires", "$$NOW"]}):
                break
            holder = self._current()
            if holder is None:
                continue  # released meanwhile
            left = float(holder.get("left", 0)) / 1000
            if _gone(holder):
                asked = time.monotonic()
                if self._take({"$eq": ["$token", {"$literal": holder.get("token")}]}):
                    log.warning(
                        "took over the server lease of %s: pid %s on this host has ended",
                        self.store,
                        holder.get("pid"),
                    )
                    break
                continue
            since = holder.get("since")
            shown = {**holder, "since": since.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(since, datetime) else since}
            stale = left < self.ttl - 2 * self.renew_every  # not renewed twice running: it may be gone
            if not stale or time.monotonic() + left > deadline:
                raise StoreInUse(
                    self.store,
                    shown,
                    f"stop it first, or serve another store (one server per store); if it is gone, its lease "
                    f"runs out in {max(left, 0):.0f} s",
                )
            log.warning(
                "%s: the server lease of %s (pid %s) has not been renewed for %.0f s; waiting %.0f s for it to run out",
                self.store,
                holder.get("host"),
                holder.get("pid"),
                self.ttl - left,
                left,
            )
            time.sleep(max(left, 0) + 0.1)
        self._valid_until = asked + self.ttl - self.renew_every
        self._paused_since = None
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew, name="raytuner-server-lease", daemon=True)
        self._thread.start()

    @property
    def paused(self) -> bool:
        """Whether the lease is held but was not renewed for ``ttl - renew_every`` seconds, so that it may run
        out before the next renewal (the database is unreachable), or was lost: the server must not use the
        store. By the monotonic clock at every call, so it holds even while the renewing thread is held up."""
        return self._thread is not None and time.monotonic() >= self._valid_until

    def _renew(self) -> None:
        """The renewing thread: renew every ``renew_every`` seconds, pausing and resuming as renewals fail and
        succeed, until released or lost."""
        import pymongo  # pymongo only with MongoDB

        while not self._stop.wait(self.renew_every):
            self._note_pause()
            asked = time.monotonic()  # the database renews at or after this: the lease lasts ttl from it
            try:
                # a renewal waits one ttl at most (a database that stopped answering, not only refused, too)
                with self.errors("renew the server lease"), pymongo.timeout(self.ttl):
                    renewed = self.collection.find_one_and_update(
                        {"_id": _LEASE_ID, "token": self.token},
                        [{"$set": {"expires": {"$add": ["$$NOW", int(self.ttl * 1000)]}}}],
                    )
                    # gone: take it again only while it cannot have run out (a database restored without
                    # it); gone after that, another server may have taken the store, served and released it
                    if renewed is None and not self._note_pause():
                        renewed = self._take({"$eq": ["$token", {"$literal": self.token}]}) or None
            except Exception as exc:  # retried at the next tick
                self._note_pause()
                log.log(
                    logging.DEBUG if self._paused_since is not None else logging.WARNING,
                    "%s: could not renew the server lease (%s); trying again",
                    self.store,
                    exc,
                )
                continue
            if renewed is None:
                self._lost(self._why_lost())
                return
            self._valid_until = asked + self.ttl - self.renew_every
            if self._paused_since is not None:
                log.warning(
                    "%s: the server lease was renewed after a pause of %.1f s (nobody took the store meanwhile); "
                    "serving again",
                    self.store,
                    time.monotonic() - self._paused_since,
                )
                self._paused_since = None

    def _note_pause(self) -> bool:
        """Whether the lease is paused now (:attr:`paused`); logs a pause the first time it sees it."""
        if not self.paused:
            return False
        if self._paused_since is None:
            self._paused_since = self._valid_until
            log.warning(
                "%s: the server lease could not be renewed for %.1f s (the database is unreachable) and may run "
                "out: serving paused until the database answers again",
                self.store,
                time.monotonic() - self._valid_until + self.ttl - self.renew_every,
            )
        return True

    def _why_lost(self) -> str:
        """Why a renewal found the lease document not this lease's: who holds it now, or that it is gone."""
        paused = (
            "" if self._paused_since is None else f" during a pause of {time.monotonic() - self._paused_since:.1f} s"
        )
        try:
            holder = self._current()
        except Exception:  # the database went away again: the message says less
            return f"was taken by another server, or is gone{paused}"
        if holder is None:
            return (
                f"document is gone{paused}: another server may have taken the store, served and released it, "
                "so this server's sessions may be stale"
            )
        who = ", ".join(f"{key} {holder.get(key, 'unknown')}" for key in ("host", "pid"))
        return f"was taken by another server ({who}){paused}"

    def _lost(self, why: str) -> None:
        """Say that this server's lease ``why`` and that it stops (``on_lost``); it stays paused."""
        self._valid_until = -math.inf
        message = f"{self.store}: this server's lease {why}; stopping"
        log.error("%s", message)
        if self.on_lost is not None:
            self.on_lost(message)

    def release(self) -> None:
        """Stop renewing and delete the lease document (when it is still this server's)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        try:
            with self.errors("release the server lease"):
                self.collection.delete_one({"_id": _LEASE_ID, "token": self.token})
        except Exception as exc:  # the lease then runs out by itself
            log.warning("%s: could not release the server lease (%s); it runs out in %.0f s", self.store, exc, self.ttl)
