"""A trial: a suggestion handed out by a tuning session, with its id, as the ledger keeps it.

Example:
    >>> trial = Trial(task={"t": 1.0}, config={"x": 0.5}, trial_id="a1")
    >>> Trial.from_document(trial.document("s1")) == trial
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from raytuner.records import Provenance
from raytuner.strategies.base import Suggestion

__all__ = ["Trial", "TrialNamer"]

#: Names a trial once its suggestion is known (for a face that routes trials by what they are).
TrialNamer = Callable[[Suggestion], str]


@dataclass
class Trial(Suggestion):
    """A suggestion handed out by a session, with its trial id."""

    trial_id: str = ""

    def document(self, session_id: str) -> dict[str, Any]:
        """The trial as the ledger's ``trials`` log keeps it.

        Args:
            session_id: The session that handed it out.
        """
        return {"session_id": session_id, "trial_id": self.trial_id, "task": self.task, "config": self.config,
                "provenance": self.provenance.model_dump(by_alias=True, exclude_none=True)}

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> "Trial":
        """The trial a ``trials`` log document holds (see :meth:`document`).

        Args:
            document: The ledger's document.
        """
        return cls(task=document["task"], config=document["config"], trial_id=document["trial_id"],
                   provenance=Provenance.model_validate(document.get("provenance") or {}))
