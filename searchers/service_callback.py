"""A Ray Tune callback that feeds the tuning service: trials become records in the shared repository.

Every finished (or errored)
trial becomes a function-evaluation record — task parameters,
tuning parameters, outputs, the machine and software configuration — and
is uploaded to the service (idempotent by uid, so a retry is harmless). A
trial that raised is a failed record, not a lost one. Records the service
could not take (it was down past the client's retries) are kept and sent
again with the next trial and at the end of the run.

Example (needs a running service)::

    from ray import tune
    from raytuner.client import RemoteTuner
    from raytuner.searchers import ServiceCallback

    client = RemoteTuner("tuner.example.org:50051", api_key)
    tune.run(train, config=space, callbacks=[ServiceCallback(client, "my_problem", outputs=["loss"])])
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ray.tune import Callback

from raytuner.errors import InvalidInputError
from raytuner.problem.environment import describe_machine, software_configuration
from raytuner.problem.records import FunctionEvaluation, Provenance, check_problem_name
from raytuner.store.retry_buffer import RetryBuffer

__all__ = ["ServiceCallback"]

log = logging.getLogger(__name__)


class ServiceCallback(Callback):
    """Upload each finished Ray Tune trial to the tuning service as a GPTune record.

    ``client`` is a :class:`~raytuner.client.RemoteTuner`;
    ``outputs`` the result keys that are the problem's outputs;
    ``task_keys`` the config keys that are task parameters (the rest are
    tuning parameters), or ``task`` fixed task parameters of the whole run.
    ``machine``/``software`` are user values that win over the captured ones
    (the host a trial ran on is taken from its result).

    Args:
        client: the :class:`~raytuner.client.RemoteTuner` that uploads.
        problem_name: the tuning problem the records belong to.
        outputs: the result keys that are the problem's outputs.
        task_keys: the config keys that are task parameters.
        task: task parameters of every trial of the run.
        machine: machine configuration values that win over the captured ones.
        software: software configuration values that win over the captured ones.
    """

    def __init__(
        self,
        client: Any,
        problem_name: str,
        outputs: Sequence[str],
        *,
        task_keys: Sequence[str] = (),
        task: Mapping[str, Any] | None = None,
        machine: Mapping[str, Any] | None = None,
        software: Mapping[str, Any] | None = None,
    ) -> None:
        if not outputs:
            raise InvalidInputError("outputs", "name at least one result key to record")
        self.client = client
        self.problem_name = check_problem_name(problem_name, field="problem_name")
        self.outputs = list(outputs)
        self.task_keys = list(task_keys)
        self.task = dict(task or {})
        self.machine = describe_machine(machine)
        self.software = software_configuration((), software)
        self._buffer: RetryBuffer[FunctionEvaluation] = RetryBuffer(self._upload, "the tuning service")

    @property
    def unsent(self) -> list[FunctionEvaluation]:
        """The records waiting for the service, oldest first."""
        return self._buffer.records(self.problem_name)

    @property
    def sent(self) -> int:
        """How many records reached the service."""
        return self._buffer.sent

    def record(self, trial: Any, failure: str | None = None) -> FunctionEvaluation:
        """The record of a Ray trial (its last result's outputs, or ``failure``).

        Args:
            trial: the Ray Tune trial.
            failure: why it failed (``None``: it did not).
        """
        config = {k: v for k, v in trial.config.items() if k not in self.task_keys}
        task = {**self.task, **{k: trial.config[k] for k in self.task_keys if k in trial.config}}
        result = dict(trial.last_result or {})
        outputs = {k: result[k] for k in self.outputs if k in result}
        if failure is None and len(outputs) < len(self.outputs):
            failure = f"the trial reported no {[k for k in self.outputs if k not in outputs][0]!r}"
        machine = dict(self.machine)
        if result.get("hostname"):
            machine["host"] = result["hostname"]
        provenance = Provenance(engine="ray_tune", trial_id=str(trial.trial_id))
        return FunctionEvaluation.create(
            task,
            config,
            None if failure else outputs,
            failure=failure,
            provenance=provenance,
            machine_configuration=machine,
            outputs=self.outputs,
            software_configuration=self.software,
            additional_output={"training_iteration": result.get("training_iteration")},
        )

    def _upload(self, problem: str, records: list[FunctionEvaluation]) -> None:
        self.client.upload_evaluations(problem, records)

    def _send(self, records: list[FunctionEvaluation]) -> None:
        self._buffer.add(self.problem_name, records)
        self._buffer.send(self.problem_name)

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        """Upload the finished trial's record.

        Args:
            iteration: Ray Tune's loop iteration.
            trials: every trial of the run.
            trial: the trial that finished.
            **info: Ray Tune's further arguments.
        """
        self._send([self.record(trial)])

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        """Upload the errored trial as a failed record.

        Args:
            iteration: Ray Tune's loop iteration.
            trials: every trial of the run.
            trial: the trial that raised.
            **info: Ray Tune's further arguments.
        """
        self._send([self.record(trial, failure=_error_text(trial))])

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        """Send what could not be sent before.

        Args:
            trials: every trial of the run.
            **info: Ray Tune's further arguments.
        """
        if self._buffer.send_all():
            log.error("%d record(s) never reached the tuning service", self._buffer.waiting())


def _error_text(trial: Any) -> str:
    path = getattr(trial, "error_file", None)
    if path and os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = [line.strip() for line in fh if line.strip()]
        if lines:
            return lines[-1][:2000]
    return "the trial raised an error"
