"""Helpers shared by the Ray test modules (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from ray import tune


class InterruptOnce(tune.Callback):
    """Interrupt the run (as Ctrl+C would) after ``after`` trials, once: the callback is restored with the run."""

    def __init__(self, after: int, marker: Path) -> None:
        self.after, self.marker, self.done = after, marker, 0

    def on_trial_complete(self, iteration: int, trials: list, trial, **info) -> None:
        self.done += 1
        if self.done == self.after and not self.marker.exists():
            self.marker.touch()
            os.kill(os.getpid(), signal.SIGINT)                 # Tune's handler ends the run, saving its state
