"""The files a JSON store's writer holds open for one problem: its journal and lock file.

:class:`ProblemFiles` keeps them open (``fcntl.flock``, one thread at a time
since flock is per open file) and appends journal lines;
:func:`cut_back` undoes a failed write (the ledger's too);
:func:`release_memory` hands a compaction's transient copy of the history
back to the OS. :class:`raytuner.store.JsonStore` uses them.
"""

from __future__ import annotations

import ctypes
import fcntl
import gc
import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from raytuner.errors import StoreError
from raytuner.store.journal import fsync_dir

__all__ = ["ProblemFiles", "cut_back", "flock_current", "release_memory"]

log = logging.getLogger(__name__)


def release_memory() -> None:
    """Hand the memory of a compaction's transient copy of the history back to the OS.

    A compaction parses and re-encodes the whole file once; without this the
    allocator keeps those pages and an appending process's RSS steps up at
    every compaction although it holds nothing.
    """
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


def flock_current(fd: int, path: Path, operation: int) -> int:
    """``flock`` the lock file at ``path`` as it is now; returns the descriptor that holds the lock.

    A lock file may be removed by its holder when it is done (the last writer
    of a problem, a ledger's append): whoever waited on the removed file gets
    its lock and finds its inode is no longer ``path``'s, so it opens the file
    now there (making it if missing) and waits again. Everyone who holds the
    lock thus holds it on the same file.

    Args:
        fd: An open descriptor of ``path`` (closed and replaced if the file was removed).
        path: The lock file.
        operation: ``fcntl.LOCK_EX`` or ``fcntl.LOCK_SH``.
    """
    while True:
        fcntl.flock(fd, operation)
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # closing releases the lock on the removed file
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def cut_back(fd: int, size: int, path: Path) -> None:
    """Cut a log back to ``size`` bytes after a failed write, so it keeps no fragment to glue the next line to.

    Args:
        fd: The log, open for writing.
        size: Its size before the write.
        path: Its path (for the warning when it cannot be cut).
    """
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError as exc:  # the next append's torn-tail check moves it aside
        log.warning("%s: cannot cut a failed write back to %d bytes: %s", path, size, exc)


class ProblemFiles:
    """Open file descriptors of one problem's journal and lock file (made if missing).

    Every writer holds a shared ``flock`` on its journal for as long as it is
    open, so the last one to close can tell it is the last (an exclusive
    ``flock`` succeeds) and remove the then empty journal and lock file
    (:meth:`close`). A writer that finds the lock file it waited on removed
    (its inode is no longer the path's) opens the new one and waits again.

    Args:
        base: The problem's GPTune file (``DIR/<problem>.json``).
    """

    def __init__(self, base: Path) -> None:
        self.main = base
        self.journal = base.with_name(base.name + ".journal")
        self.lock_path = base.with_name(base.name + ".lock")
        self.thread_lock = threading.Lock()  # flock is per open file, not per thread
        self.lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        self._lock_current(fcntl.LOCK_EX)
        try:
            self.journal_fd = os.open(self.journal, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            fcntl.flock(self.journal_fd, fcntl.LOCK_SH)  # "a writer has this problem open", until close()
            fsync_dir(base.parent)  # a new journal's directory entry must be durable too
        finally:
            fcntl.flock(self.lock_fd, fcntl.LOCK_UN)

    def _lock_current(self, operation: int) -> None:
        """``flock`` the lock file that is at :attr:`lock_path` now, reopening it if the last writer removed it."""
        self.lock_fd = flock_current(self.lock_fd, self.lock_path, operation)

    @contextmanager
    def locked(self, exclusive: bool) -> Iterator[None]:
        """Hold the problem's lock, exclusively (a writer) or shared (a reader), against threads and processes.

        Args:
            exclusive: Whether to exclude readers as well as writers.
        """
        with self.thread_lock:
            self._lock_current(fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(self.lock_fd, fcntl.LOCK_UN)

    def append(self, payload: bytes) -> int:
        """Append one journal line and fsync it (after a newline when a crash left a torn last line).

        Returns the journal's size after it. A write that fails (a full disk) is cut back, so the journal
        keeps no fragment, and raises :class:`~raytuner.errors.StoreError`, as does a failed fsync.

        Args:
            payload: The line, with its newline.
        """
        with self.locked(exclusive=True):
            size = os.fstat(self.journal_fd).st_size
            try:
                if size and os.pread(self.journal_fd, 1, size - 1) != b"\n":
                    payload = b"\n" + payload  # a torn line from a crash: start afresh
                view = memoryview(payload)
                while view:
                    view = view[os.write(self.journal_fd, view) :]
            except OSError as exc:
                cut_back(self.journal_fd, size, self.journal)
                raise StoreError(f"cannot append to {self.journal}: {exc.strerror or exc}") from None
        try:
            os.fsync(self.journal_fd)  # outside the lock: other writers go on meanwhile
        except OSError as exc:
            raise StoreError(f"cannot sync {self.journal}: {exc.strerror or exc}") from None
        return size + len(payload)

    def main_size(self) -> int:
        """The GPTune file's size in bytes (0 while there is none)."""
        try:
            return self.main.stat().st_size
        except FileNotFoundError:
            return 0

    def close(self, tidy: bool = True) -> None:
        """Close the journal and the lock file; with ``tidy``, the last writer removes them when the journal is empty.

        The GPTune file then holds every record, and the directory only the
        files a user shares. A journal that still holds lines (a compaction
        that failed) is kept, as is everything while another writer is open.

        Args:
            tidy: Whether to remove an empty journal and the lock file when no other writer has them open.
        """
        try:
            if tidy:
                with self.locked(exclusive=True):
                    self._remove_if_last()
        finally:
            os.close(self.journal_fd)
            os.close(self.lock_fd)

    def _remove_if_last(self) -> None:
        """Remove the journal and lock file if the journal is empty and no other writer holds it (lock held)."""
        if os.fstat(self.journal_fd).st_size:
            return
        try:
            fcntl.flock(self.journal_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another writer has the problem open: it tidies up when it closes
        try:
            self.journal.unlink()
            self.lock_path.unlink()  # waiting writers notice (their lock's inode is gone) and make a new one
            fsync_dir(self.main.parent)
        except OSError as exc:
            log.warning("%s: could not remove the empty journal and lock file: %s", self.journal, exc)
