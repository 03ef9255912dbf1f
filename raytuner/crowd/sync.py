"""Automatic upload to the crowd repository (``"sync_crowd_repo": "yes"`` in a meta description).

:class:`CrowdSyncStore` wraps a history store: every evaluation is first
persisted locally (durable, as always), then uploaded to the crowd repository.
An upload that fails (the repository is down, the network is out) is logged,
kept, and sent again with the next evaluation and at :meth:`CrowdSyncStore.flush`
or ``close``; tuning never stops for the crowd. Uploads are idempotent by
uid, so sending a record twice is harmless. Given ``upload_models``, the
surrogate-model records a run stores go along with its next evaluations
(and at ``flush``), but only a model fitted to records this wrapper owns
(``owns``): one fitted to other data too (the crowd's records as a source,
records imported from a file, another user's on a shared server) would carry
that data's values and uids into the crowd, so it stays local. Models are not
caught up on by a later run.

Killing the run can leave the last records local only. The first evaluation
a wrapper appends to a problem therefore first sends the problem's earlier
records that the wrapper owns (by default, those a raytuner tuning session
made: their provenance names the session; records imported from GPTune files
or uploaded by others do not), so a resumed run
catches up on what a killed one did not send.

:func:`raytuner.client.crowd.sync_store_for` reads the meta
description: it returns the store itself when ``sync_crowd_repo`` is off, and
a :class:`CrowdSyncStore` sending through a ``CrowdClient`` with the meta
description's ``api_key`` when it is on. The tuning service does the same on
the server side for sessions created from such a meta description.

Example:
    >>> import tempfile
    >>> from raytuner.problem.records import FunctionEvaluation
    >>> from raytuner.store import JsonStore
    >>> sent = []
    >>> store = CrowdSyncStore(JsonStore(tempfile.mkdtemp()), lambda problem, records: sent.extend(records))
    >>> store.append("demo", FunctionEvaluation.create({"t": 1}, {"x": 0.5}, {"y": 2.0}))
    >>> len(sent), len(store.evaluations("demo")), store.unsent
    (1, 1, 0)

    With a meta description (needs a crowd repository server)::

        meta = MetaDescription.load("meta.json")        # "sync_crowd_repo": "yes", "api_key": "rt_..."
        from raytuner.client.crowd import sync_store_for

        searcher = LCMSearcher(meta.problem_space, tasks, store=sync_store_for(meta, "history/"),
                               problem_name=meta.tuning_problem_name)
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from raytuner.crowd.access import User
from raytuner.problem.records import FunctionEvaluation, SurrogateModelRecord
from raytuner.store.base import EvaluationQuery, HistoryStore
from raytuner.store.ledger import Ledger
from raytuner.store.retry_buffer import RetryBuffer

__all__ = ["CrowdSyncStore", "Uploader", "ModelUploader", "made_by_raytuner", "SYNC_ACCESS", "DEFAULT_SYNC_ACCESS"]

log = logging.getLogger(__name__)

#: Access levels a meta-description sync gives the records it uploads.
SYNC_ACCESS = ("public", "registered", "private")
#: The access level of synced records unless their creator chooses (a service session's ``options.crowd_access``,
#: ``sync_store_for(access=)``): the records are the creator's own data; sharing them wider is the creator's choice.
DEFAULT_SYNC_ACCESS = "private"
#: Sends a problem's evaluations to the crowd repository; raises when it could not.
Uploader = Callable[[str, list[FunctionEvaluation]], Any]
#: Sends a problem's surrogate-model records to the crowd repository; raises when it could not.
ModelUploader = Callable[[str, list[SurrogateModelRecord]], Any]


def made_by_raytuner(record: FunctionEvaluation) -> bool:
    """Whether a raytuner tuning session made ``record`` (its provenance names the session).

    Args:
        record: a function evaluation.
    """
    return record.raytuner is not None and record.raytuner.session_id is not None


class CrowdSyncStore(HistoryStore):
    """A history store that also uploads each appended evaluation to the crowd repository.

    ``upload(problem, records)`` sends records (raising when it could not);
    ``owns(record)`` says which earlier local records of a problem are this
    wrapper's to catch up on (see the module docs). Reads go to ``store``.

    Args:
        store: the local store every record goes to first, and every read.
        upload: ``upload(problem, records)``, the crowd upload (raises when it could not).
        owns: which earlier local records are this wrapper's to catch up on (default :func:`made_by_raytuner`).
        upload_models: ``upload_models(problem, records)``, the crowd upload of surrogate-model records
            (default ``None``: models stay local).
    """

    def __init__(
        self,
        store: HistoryStore,
        upload: Uploader,
        *,
        owns: Callable[[FunctionEvaluation], bool] = made_by_raytuner,
        upload_models: ModelUploader | None = None,
    ) -> None:
        self.store = store
        self._owns = owns
        self._unsent: RetryBuffer[FunctionEvaluation] = RetryBuffer(upload, "the crowd repository")
        self._unsent_models: RetryBuffer[SurrogateModelRecord] | None = (
            None if upload_models is None else RetryBuffer(upload_models, "the crowd repository (models)")
        )
        self._caught_up: set[str] = set()
        self._owned: dict[str, set[str]] = {}  # per problem, the uids of the records this wrapper owns
        self._lock = threading.Lock()

    @classmethod
    def as_user(
        cls, store: HistoryStore, repository: Any, user: User, session_id: str, access: str = DEFAULT_SYNC_ACCESS
    ) -> CrowdSyncStore:
        """``store``, session ``session_id``'s evaluations and models uploaded to ``repository`` as ``user``.

        For the tuning service, which holds the crowd repository itself (no client, no key per call).

        Args:
            store: the local store.
            repository: the crowd repository (a :class:`~raytuner.crowd.CrowdRepository`).
            user: the authenticated user the records are uploaded as.
            session_id: the session whose earlier records are caught up on.
            access: the access level the records get (one of :data:`SYNC_ACCESS`; default private).
        """
        upload = functools.partial(repository.upload_as, user, access=access)
        return cls(
            store,
            upload,
            upload_models=functools.partial(upload, kind="surrogate_model"),
            owns=lambda r: r.raytuner is not None and r.raytuner.session_id == session_id,
        )

    def __repr__(self) -> str:
        return f"CrowdSyncStore({self.store!r})"

    @property
    def unsent(self) -> int:
        """How many records (evaluations and surrogate models) are waiting to be uploaded."""
        with self._lock:
            return self._unsent.waiting() + (self._unsent_models.waiting() if self._unsent_models else 0)

    def append(self, problem: str, record: FunctionEvaluation) -> None:
        """Persist locally (durable when this returns), then upload what is waiting."""
        self.store.append(problem, record)
        with self._lock:
            self._note_owned(problem, [record])
            if problem not in self._caught_up:
                self._caught_up.add(problem)
                earlier = [r for r in self.store.evaluations(problem) if r.uid != record.uid and self._owns(r)]
                self._unsent.add(problem, earlier)
            self._unsent.add(problem, [record])
            if self._unsent.send(problem) and self._unsent_models is not None:
                self._unsent_models.send(problem)

    def flush(self) -> int:
        """Try again to upload every waiting record; returns how many are still waiting."""
        with self._lock:
            return self._unsent.send_all() + (self._unsent_models.send_all() if self._unsent_models else 0)

    def _queue_models(self, problem: str, records: Sequence[SurrogateModelRecord]) -> None:
        """Queue the models fitted to the problem's own records alone (see the module docs)."""
        if self._unsent_models is None or not records:
            return
        with self._lock:
            own = self._owned_uids(problem)
            mine = [m for m in records if set(m.function_evaluations) <= own]
            self._unsent_models.add(problem, mine)
        if len(mine) < len(records):
            log.info(
                "%d surrogate model(s) of %s were fitted to records from elsewhere too (sources); kept local",
                len(records) - len(mine),
                problem,
            )

    def _owned_uids(self, problem: str) -> set[str]:
        """The uids of the problem's records this wrapper owns (not imported ones, not others'): read once."""
        if problem not in self._owned:
            self._owned[problem] = {r.uid for r in self.store.evaluations(problem) if self._owns(r)}
        return self._owned[problem]

    def _note_owned(self, problem: str, records: Sequence[FunctionEvaluation]) -> None:
        if problem in self._owned:
            self._owned[problem].update(r.uid for r in records if self._owns(r))

    def append_model(self, problem: str, record: SurrogateModelRecord) -> None:
        """Persist a surrogate-model record locally (durable when this returns); it goes up with the next evaluations."""
        self.store.append_model(problem, record)
        self._queue_models(problem, [record])

    def evaluations(self, problem: str, query: EvaluationQuery | None = None) -> list[FunctionEvaluation]:
        """The local store's evaluations."""
        return self.store.evaluations(problem, query)

    def models(self, problem: str) -> list[SurrogateModelRecord]:
        """The local store's surrogate-model records."""
        return self.store.models(problem)

    def problems(self) -> list[str]:
        """The local store's problems."""
        return self.store.problems()

    def check_writable(self, problem: str) -> None:
        """The wrapped store's check (see :meth:`HistoryStore.check_writable`).

        Args:
            problem: The tuning problem's name.
        """
        self.store.check_writable(problem)

    def ledger(self) -> Ledger:
        """The local store's trial ledger."""
        return self.store.ledger()

    def append_batch(
        self, problem: str, evaluations: Sequence[FunctionEvaluation] = (), models: Sequence[SurrogateModelRecord] = ()
    ) -> None:
        """Persist records locally (all or none, durable), then upload them together.

        Args:
            problem: The tuning problem's name.
            evaluations: ``func_eval`` records to add and upload.
            models: ``surrogate_model`` records to add (and upload with the evaluations when models sync).
        """
        self.store.append_batch(problem, evaluations, models)
        with self._lock:
            self._note_owned(problem, evaluations)
        self._queue_models(problem, models)
        if evaluations:
            with self._lock:
                self._unsent.add(problem, evaluations)
                if self._unsent.send(problem) and self._unsent_models is not None:
                    self._unsent_models.send(problem)

    def close(self) -> None:
        """Upload what is waiting (once more), then close the local store."""
        left = self.flush()
        if left:
            log.error(
                "%d record(s) never reached the crowd repository; a later synced run of the same "
                "problem sends the evaluations among them",
                left,
            )
        self.store.close()
