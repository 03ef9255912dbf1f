"""Damage for the store's tests: damaged lines of each kind, and writes cut short by a full disk."""

from __future__ import annotations

import errno
import os
from typing import Any

import pytest

#: JSON nested far past Python's recursion limit: ``json.loads`` raises RecursionError, not a JSONDecodeError.
DEEP = b"[" * 100_000 + b"]" * 100_000

#: A damaged line of each kind, as a crash, a flipped byte or a bad disk leaves one.
DAMAGE = {
    "bad_utf8": b'{"session_id": "\xff\xfe\xfd", "trial_id": "\xc3("}\n',
    "not_an_object": b"[]\n",
    "nul": b"\x00" * 48 + b"\n",
    "torn": b'{"session_id": "torn", "trial_id": "torn", "con',  # no newline: a killed writer's
    "deep": DEEP + b"\n",
}


class ShortWrites:
    """``os.write`` that, once armed, writes half of the next write to a file named ``name``, then fails with ENOSPC.

    A full disk does this: a short write, then ``ENOSPC`` for the rest. Other files are written as usual.

    Args:
        monkeypatch: Replaces ``os.write`` (undone with the test).
        name: The end of the path of the file whose write fails.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.name = name
        self.state = "idle"  # armed -> half (half written) -> done (ENOSPC raised)
        self.real = os.write
        monkeypatch.setattr(os, "write", self)

    def __call__(self, fd: int, data: Any) -> int:
        if self.state in ("armed", "half") and os.readlink(f"/proc/self/fd/{fd}").endswith(self.name):
            if self.state == "armed":
                self.state = "half"
                return self.real(fd, bytes(data[: len(data) // 2]))
            self.state = "done"
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.real(fd, data)
