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

__all__ = ["ProblemFiles", "cut_back", "release_memory"]

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

    Args:
        base: The problem's GPTune file (``DIR/<problem>.json``).
    """

    def __init__(self, base: Path) -> None:
        self.main = base
        self.journal = base.with_name(base.name + ".journal")
        self.lock_path = base.with_name(base.name + ".lock")
        self.lock_fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.journal_fd = os.open(self.journal, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        fsync_dir(base.parent)  # a new journal's directory entry must be durable too
        self.thread_lock = threading.Lock()  # flock is per open file, not per thread

    @contextmanager
    def locked(self, exclusive: bool) -> Iterator[None]:
        """Hold the problem's lock, exclusively (a writer) or shared (a reader), against threads and processes.

        Args:
            exclusive: Whether to exclude readers as well as writers.
        """
        with self.thread_lock:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
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

    def close(self) -> None:
        """Close the journal and the lock file."""
        os.close(self.journal_fd)
        os.close(self.lock_fd)
