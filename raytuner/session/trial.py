"""A trial: a suggestion handed out by a tuning session, with its id, as the ledger keeps it.

A trial handed out again after another one's lease expired (same task and configuration) names
the trial it ``replaces``, so a restarted session knows the expired one is no longer in flight.

Example:
    >>> trial = Trial(task={"t": 1.0}, config={"x": 0.5}, trial_id="a1")
    >>> Trial.from_document(trial.document("s1")) == trial
    True
    >>> again = Trial(task={"t": 1.0}, config={"x": 0.5}, trial_id="a2", replaces="a1")
    >>> Trial.from_document(again.document("s1")).replaces
    'a1'
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from raytuner.engines.base import Suggestion
from raytuner.problem.records import Provenance

__all__ = ["Trial", "TrialNamer", "read_trials"]

log = logging.getLogger(__name__)

#: Names a trial once its suggestion is known (for a face that routes trials by what they are).
TrialNamer = Callable[[Suggestion], str]


@dataclass
class Trial(Suggestion):
    """A suggestion handed out by a session, with its trial id (and the expired trial it replaces, if any)."""

    trial_id: str = ""
    replaces: str = ""

    def document(self, session_id: str) -> dict[str, Any]:
        """The trial as the ledger's ``trials`` log keeps it.

        Args:
            session_id: The session that handed it out.
        """
        document = {
            "session_id": session_id,
            "trial_id": self.trial_id,
            "task": self.task,
            "config": self.config,
            "provenance": self.provenance.model_dump(by_alias=True, exclude_none=True),
        }
        if self.replaces:
            document["replaces"] = self.replaces
        return document

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Trial:
        """The trial a ``trials`` log document holds (see :meth:`document`).

        Args:
            document: The ledger's document.
        """
        return cls(
            task=document["task"],
            config=document["config"],
            trial_id=document["trial_id"],
            provenance=Provenance.model_validate(document.get("provenance") or {}),
            replaces=document.get("replaces") or "",
        )


def read_trials(documents: Iterable[Mapping[str, Any]]) -> Iterator[Trial]:
    """The trials of ``trials`` log documents; a document that holds no trial is skipped with a warning.

    A damaged line that is still a JSON object (a field missing, a value of another type) costs that
    trial only, never the session's other trials; the line stays in the log.

    Args:
        documents: The log's documents (:meth:`raytuner.store.ledger.Ledger.read`).

    >>> good = Trial(task={"t": 1.0}, config={"x": 0.5}, trial_id="a1").document("s1")
    >>> [t.trial_id for t in read_trials([{"session_id": "s1", "trial_id": 7}, good])]
    ['a1']
    """
    for document in documents:
        try:
            trial = Trial.from_document(document)
        except (KeyError, TypeError, ValueError, ValidationError) as exc:
            log.warning(
                "skipping a trials log entry of session %s that holds no trial (%s: %s)",
                document.get("session_id"),
                type(exc).__name__,
                exc,
            )
            continue
        if not (
            isinstance(trial.trial_id, str)
            and isinstance(trial.task, dict)
            and isinstance(trial.config, dict)
            and isinstance(trial.replaces, str)
        ):
            log.warning(
                "skipping a trials log entry of session %s that holds no trial (trial_id %r)",
                document.get("session_id"),
                trial.trial_id,
            )
            continue
        yield trial
