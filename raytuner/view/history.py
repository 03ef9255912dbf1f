"""A tuning history as a table: its evaluations, the best per task, and best-so-far curves.

:func:`load_history` reads a problem from any store (a JSON store directory,
a MongoDB URI, an open :class:`~raytuner.store.HistoryStore`), a GPTune file,
a :class:`~raytuner.problem.records.HistoryDocument` or a live
:class:`~raytuner.session.tuning_session.TuningSession`, and gives a :class:`HistoryView`:
``view.frame`` is a pandas DataFrame with one row per evaluation (task,
parameters, fidelity, outputs, status, bracket/rung/pass, cost, time, machine,
software), ``view.best_table()`` the best configuration per task at full fidelity,
``view.best_so_far()`` the running best against evaluations and normalised
cost. The objective's goal (minimise or maximise) comes from the problem when
given, else from the newest stored surrogate model, else minimise.

Example:
    >>> from raytuner.problem.records import FunctionEvaluation, HistoryDocument, Provenance
    >>> doc = HistoryDocument(tuning_problem_name="demo", func_eval=[
    ...     FunctionEvaluation.create({"t": 1.0}, {"x": 0.2}, {"y": 0.9}, provenance=Provenance(cost=1.0)),
    ...     FunctionEvaluation.create({"t": 1.0}, {"x": 0.4}, {"y": 0.7}, provenance=Provenance(cost=1.0)),
    ...     FunctionEvaluation.create({"t": 2.0}, {"x": 0.5}, failure="diverged")])
    >>> view = load_history(doc)
    >>> view.best_table()[["task", "x", "y", "evaluations"]].to_dict("records")
    [{'task': 't=1', 'x': 0.4, 'y': 0.7, 'evaluations': 2}, {'task': 't=2', 'x': nan, 'y': nan, 'evaluations': 1}]
    >>> view.best({"t": 1.0}).tuning_parameter, view.best({"t": 2.0})
    ({'x': 0.4}, None)
    >>> view.best_so_far()["best"].tolist()
    [0.9, 0.7, nan]
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

import numpy as np
import pandas as pd

from raytuner.errors import InvalidInputError
from raytuner.problem.pareto import best_of, pareto_front
from raytuner.problem.records import (
    FunctionEvaluation,
    HistoryDocument,
    SurrogateModelRecord,
    check_problem_name,
    task_key,
)
from raytuner.problem.space import ProblemSpace
from raytuner.session.progress import config_label, in_task_order, task_label
from raytuner.store import HistoryStore, is_mongodb_uri, open_store, read_history_file

if TYPE_CHECKING:  # a session's engines are imported by whoever has a session, not by every reader of a history
    from raytuner.session.tuning_session import TuningSession

__all__ = [
    "HistoryView",
    "load_history",
    "read_history",
    "problem_in",
    "task_label",
    "record_time",
    "config_label",
    "csv_text",
    "DETAIL_COLUMNS",
]

Goal = Literal["minimize", "maximize"]

#: Columns that identify where a record came from: tables for reading leave them out (the CSV keeps them).
DETAIL_COLUMNS = ("failure", "source", "session", "trial", "uid")

#: How a text cell begins that a spreadsheet would read as a formula (OWASP's list for CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

#: Columns every frame has, after the task label (task, parameters and outputs come between).
FIXED_COLUMNS = (
    "task",
    "fidelity",
    "cost",
    "pass",
    "bracket",
    "rung",
    "status",
    "failure",
    "engine",
    "source",
    "time",
    "machine",
    "software",
    "session",
    "trial",
    "uid",
)


def _inert(value: Any) -> Any:
    """``value``, with a ``'`` before it when it is text a spreadsheet would read as a formula."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def csv_text(frame: pd.DataFrame) -> str:
    """``frame`` as CSV that a spreadsheet opens without running anything: every CSV download and export.

    A text cell or column name from a store that begins with ``=``, ``+``,
    ``-``, ``@``, a tab or a carriage return (``=HYPERLINK(...)``, a task
    value ``-1+2``) gets a leading ``'``, as OWASP advises against CSV
    injection; numbers, negative ones included, stay numbers.

    Args:
        frame: a table, e.g. :attr:`HistoryView.frame` or some of its rows.

    >>> print(csv_text(pd.DataFrame({"=name": ["=1+2", "ok", -1.5]})), end="")
    '=name
    '=1+2
    ok
    -1.5
    """
    safe = frame.set_axis([_inert(c) for c in frame.columns], axis="columns")
    for n in range(safe.shape[1]):
        if not pd.api.types.is_numeric_dtype(safe.iloc[:, n]):
            safe.isetitem(n, safe.iloc[:, n].map(_inert))
    return safe.to_csv(index=False)


def _empty_columns(frame: pd.DataFrame) -> frozenset[str]:
    """The columns of ``frame`` in which every value is missing or empty text."""
    empty = []
    for name in frame.columns:
        column = frame[name]
        present = column.notna()
        if column.dtype == object or pd.api.types.is_string_dtype(column.dtype):
            present &= column != ""
        if not present.any():
            empty.append(name)
    return frozenset(empty)


def _counts(frame: pd.DataFrame) -> dict[str, tuple[int, int, float]]:
    """Per task label of ``frame``'s rows: how many, how many failed, their cost (an evaluation without one: 1)."""
    by_task = frame["task"]
    evaluations = by_task.value_counts()
    failed = (frame["status"] != "ok").groupby(by_task).sum()
    costs = pd.to_numeric(frame["cost"], errors="coerce").fillna(1.0).groupby(by_task).sum()
    return {str(t): (int(evaluations[t]), int(failed.get(t, 0)), float(costs.get(t, 0.0))) for t in evaluations.index}


def record_time(record: FunctionEvaluation) -> _dt.datetime | None:
    """When an evaluation's record was made (local time, as GPTune keeps it; ``None``: no valid time).

    Args:
        record: an evaluation.
    """
    t = record.time
    try:
        return _dt.datetime(t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)
    except (TypeError, ValueError):
        return None


def _machine(record: FunctionEvaluation) -> str:
    return str(record.machine_configuration.get("machine_name", "")) if record.machine_configuration else ""


def _software(record: FunctionEvaluation) -> str:
    parts = []
    for name, value in sorted(record.software_configuration.items()):
        version = value.get("version_split") if isinstance(value, Mapping) else None
        parts.append(f"{name} {'.'.join(map(str, version))}" if isinstance(version, list) else str(name))
    return ", ".join(parts)


def _goal_from_models(models: Sequence[SurrogateModelRecord], objective: str) -> Goal | None:
    for model in reversed(models):
        spaces = (model.raytuner or {}).get("spaces") or {}
        for output in spaces.get("output_space") or []:
            if (
                isinstance(output, Mapping)
                and output.get("name") == objective
                and output.get("goal") in ("minimize", "maximize")
            ):
                return output["goal"]
    return None


def _space_from_models(models: Sequence[SurrogateModelRecord]) -> ProblemSpace | None:
    """The spaces the newest stored model was fitted in, when it kept them (a store made by raytuner)."""
    for model in reversed(models):
        spaces = (model.raytuner or {}).get("spaces")
        if isinstance(spaces, Mapping):
            try:
                return ProblemSpace.parse(dict(spaces), "surrogate_model")
            except InvalidInputError:
                continue
    return None


@dataclass
class HistoryView:
    """One problem's evaluations as a table, with the best per task and best-so-far curves.

    Build it with :func:`load_history`.

    Args:
        problem: the tuning problem's name.
        records: its evaluations, oldest first.
        models: its surrogate-model records, oldest first.
        objective: the output the best values are of.
        goal: ``minimize`` or ``maximize`` (of ``objective``).
        goal_source: where the goal came from (``problem``, ``model`` or ``default``).
        problem_space: the problem, when known (its objectives and output constraints give the Pareto front):
            given, or the newest stored model's.
    """

    problem: str
    records: list[FunctionEvaluation]
    models: list[SurrogateModelRecord] = field(default_factory=list)
    objective: str = "y"
    goal: Goal = "minimize"
    goal_source: str = "default"
    problem_space: ProblemSpace | None = None
    #: Whether :attr:`problem_space` was read from the stored models (:meth:`extended` reads it again).
    _space_from_models: bool = field(default=False, init=False, repr=False, compare=False)
    #: Whether :attr:`objective` is the first output of the records (neither given nor the problem's): a view of
    #: no evaluation yet takes it from the first ones :meth:`extended` adds.
    _objective_from_records: bool = field(default=False, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        return (
            f"HistoryView(problem={self.problem!r}, evaluations={len(self.records)}, tasks={len(self.tasks)}, "
            f"objective={self.objective!r}, goal={self.goal!r})"
        )

    @cached_property
    def tasks(self) -> list[dict[str, Any]]:
        """The distinct tasks, sorted by their parameter values (as they first appear where values do not sort)."""
        seen: dict[Any, dict[str, Any]] = {}
        for record in self.records:
            seen.setdefault(task_key(record.task_parameter), dict(record.task_parameter))
        return in_task_order(seen)

    @property
    def multiobjective(self) -> bool:
        """Whether the problem is known to tune several objectives or bound an output (it then has fronts)."""
        return self.problem_space is not None and self.problem_space.multiobjective

    @cached_property
    def full_fidelity(self) -> float | None:
        """The highest fidelity any evaluation ran at (``None``: no evaluation has a fidelity)."""
        levels = [r.raytuner.fidelity for r in self.records if r.raytuner and r.raytuner.fidelity is not None]
        return max(levels) if levels else None

    def is_full_fidelity(self, record: FunctionEvaluation) -> bool:
        """Whether ``record`` counts towards the best: it ran at full fidelity, or there are no fidelities.

        Args:
            record: an evaluation of this history.
        """
        fidelity = record.raytuner.fidelity if record.raytuner else None
        return fidelity is None or self.full_fidelity is None or math.isclose(fidelity, self.full_fidelity)

    @cached_property
    def columns(self) -> dict[str, dict[str, str]]:
        """The frame's column of each name, by kind (``task``, ``parameter``, ``output``).

        A name that clashes with a fixed column or an earlier kind is prefixed
        ``task.``, ``param.`` or ``output.``.
        """
        taken = set(FIXED_COLUMNS)

        def column(prefix: str, name: str) -> str:
            chosen = name if name not in taken else f"{prefix}.{name}"
            taken.add(chosen)
            return chosen

        kinds = (
            ("task", "task", sorted({k for r in self.records for k in r.task_parameter})),
            ("parameter", "param", list(dict.fromkeys(k for r in self.records for k in r.tuning_parameter))),
            (
                "output",
                "output",
                list(dict.fromkeys([*(k for r in self.records for k in r.evaluation_result), self.objective])),
            ),
        )  # the objective's column always
        return {kind: {n: column(prefix, n) for n in names} for kind, prefix, names in kinds}

    @cached_property
    def frame(self) -> pd.DataFrame:
        """One row per evaluation, oldest first (columns: :attr:`columns`, then the fixed ones)."""
        return self._rows(self.records)

    def _rows(self, records: Sequence[FunctionEvaluation]) -> pd.DataFrame:
        """The rows of :attr:`frame` of ``records``."""
        task_cols, param_cols, output_cols = (self.columns[k] for k in ("task", "parameter", "output"))
        rows = []
        for r in records:
            p = r.raytuner
            row: dict[str, Any] = {"task": task_label(r.task_parameter)}
            row.update({task_cols[k]: v for k, v in r.task_parameter.items()})
            row.update({param_cols[k]: v for k, v in r.tuning_parameter.items()})
            row.update({output_cols[k]: (r.value(k) if r.status == "ok" else None) for k in r.evaluation_result})
            row.update(
                {
                    "fidelity": p.fidelity if p else None,
                    "cost": p.cost if p else None,
                    "pass": p.pass_ if p else None,
                    "bracket": p.bracket if p else None,
                    "rung": p.rung if p else None,
                    "status": r.status,
                    "failure": (p.failure_message if p else None) or "",
                    "engine": (p.engine if p else None) or r.modeling or "",
                    "source": r.source,
                    "time": record_time(r),
                    "machine": _machine(r),
                    "software": _software(r),
                    "session": (p.session_id if p else None) or "",
                    "trial": (p.trial_id if p else None) or "",
                    "uid": r.uid,
                }
            )
            rows.append(row)
        order = ["task", *task_cols.values(), *param_cols.values(), *output_cols.values(), *FIXED_COLUMNS[1:]]
        frame = pd.DataFrame(rows, columns=order)
        for name in output_cols.values():
            frame[name] = pd.to_numeric(frame[name], errors="coerce")
        return frame

    @cached_property
    def empty_columns(self) -> frozenset[str]:
        """The columns of :attr:`frame` that no row fills (every value missing or empty text)."""
        return _empty_columns(self.frame)

    @property
    def objective_column(self) -> str:
        """The frame's column of the objective (its name, or ``output.NAME`` where the name clashes)."""
        return self.columns["output"].get(self.objective, self.objective)

    def _ranked(self, values: pd.Series) -> pd.Series:
        return values if self.goal == "minimize" else -values

    def best(self, task: Mapping[str, Any] | None = None) -> FunctionEvaluation | None:
        """The best evaluation of ``task`` at full fidelity, or ``None`` while none counts.

        It answers as every engine's and session's ``best()`` does
        (:func:`raytuner.problem.pareto.best_of`): the evaluation that
        succeeded, meets every output constraint and is best in
        :attr:`objective`; evaluations below full fidelity do not count.

        Args:
            task: One of :attr:`tasks` (default: the first).
        """
        tasks = self.tasks
        if task is None:
            return self.best_per_task()[0] if tasks else None
        keys = [task_key(t) for t in tasks]
        if task_key(task) not in keys:
            raise InvalidInputError(
                "task", f"{dict(task)} is no task of this history", allowed=[task_label(t) for t in tasks]
            )
        return self.best_per_task()[keys.index(task_key(task))]

    def best_per_task(self) -> list[FunctionEvaluation | None]:
        """:meth:`best` of each task, in :attr:`tasks` order."""
        return [None if i is None else self.records[i] for i in self._best_rows]

    @cached_property
    def _best_rows(self) -> list[int | None]:
        """Per task (in :attr:`tasks` order) the index of its best evaluation at full fidelity, or ``None``."""
        if self.problem_space is not None and self.objective in self.problem_space.objectives:
            full = [n for n, r in enumerate(self.records) if self.is_full_fidelity(r)]
            row_of = {id(self.records[n]): n for n in full}
            found = [
                best_of(self.problem_space, [self.records[n] for n in full], t, self.objective) for t in self.tasks
            ]
            return [None if r is None else row_of[id(r)] for r in found]
        return self._best_after({}, 0)

    def _best_after(self, held: Mapping[Any, int], start: int) -> list[int | None]:
        """:attr:`_best_rows` from ``held`` (per task key, the best row among the first ``start``) and the rest."""
        best = dict(held)
        if self.problem_space is not None and self.objective in self.problem_space.objectives:
            for task in self.tasks:  # of equal ones the first: the one held, then the new ones in order
                key = task_key(task)
                rows = [best[key]] if key in best else []
                rows += [
                    n
                    for n in range(start, len(self.records))
                    if task_key(self.records[n].task_parameter) == key and self.is_full_fidelity(self.records[n])
                ]
                found = best_of(self.problem_space, [self.records[n] for n in rows], task, self.objective)
                if found is not None:
                    best[key] = next(n for n in rows if self.records[n] is found)
            return [best.get(task_key(t)) for t in self.tasks]
        sign = 1.0 if self.goal == "minimize" else -1.0
        values = {k: sign * v for k, n in best.items() if (v := self.records[n].value(self.objective)) is not None}
        for index in range(start, len(self.records)):
            record = self.records[index]
            value = record.value(self.objective)
            if value is None or not self.is_full_fidelity(record):
                continue
            key = task_key(record.task_parameter)
            if key not in values or sign * value < values[key]:
                best[key], values[key] = index, sign * value
        return [best.get(task_key(t)) for t in self.tasks]

    def extended(
        self, records: Sequence[FunctionEvaluation], models: Sequence[SurrogateModelRecord] = ()
    ) -> HistoryView:
        """This history with ``records`` and ``models`` appended after its own, as a new view (this one is unchanged).

        What pages read of a large history while it grows: the table's new rows are
        built for the new records alone and added to it, each task's best is
        compared with the new records only, the tasks and the highest fidelity
        are updated; what the new records change more deeply (a new column, a
        column's type, a new highest fidelity, another goal or problem from a
        new model) is computed again when first asked for. The result is the
        view a full read of all the records gives. A goal or a problem that
        came from the stored models is read again from all of them; the objective
        a view of no evaluation assumed is the first output of the evaluations added.

        Args:
            records: evaluations appended since this view's, oldest first.
            models: surrogate-model records appended since this view's.

        >>> from raytuner.problem.records import FunctionEvaluation, HistoryDocument
        >>> first = load_history(HistoryDocument(tuning_problem_name="demo", func_eval=[
        ...     FunctionEvaluation.create({"t": 1.0}, {"x": 0.2}, {"y": 0.9})]))
        >>> later = first.extended([FunctionEvaluation.create({"t": 1.0}, {"x": 0.4}, {"y": 0.7})])
        >>> len(first.records), later.best_table()[["x", "y", "evaluations"]].to_dict("records")
        (1, [{'x': 0.4, 'y': 0.7, 'evaluations': 2}])
        """
        all_models = [*self.models, *models]
        goal, goal_source, space, objective = self.goal, self.goal_source, self.problem_space, self.objective
        if self._objective_from_records and not self.records and records:
            objective = _objective_of(records, None, None)  # as load_history chooses it from these records
        if models and self._space_from_models:
            space = _space_from_models(all_models)
        if (models or objective != self.objective) and goal_source in ("model", "default"):
            found = _goal_from_models(all_models, objective)
            goal, goal_source = found or "minimize", "model" if found else "default"
        view = HistoryView(self.problem, [*self.records, *records], all_models, objective, goal, goal_source, space)
        view._space_from_models = self._space_from_models
        view._objective_from_records = self._objective_from_records
        if (objective, goal, space) == (self.objective, self.goal, self.problem_space):
            view._carry(self, len(self.records))
        return view

    def share_table(self, other: HistoryView) -> None:
        """Take :attr:`frame` (and the tasks, columns, highest fidelity) from ``other``, a view of the same records.

        A view of another objective of the same history has the same table: it is built once.

        Args:
            other: a view whose records are this view's (the same list).
        """
        if other.records is not self.records and other.records != self.records:
            raise InvalidInputError("other", "a view of other records has another table")
        if self.objective in other.columns["output"]:  # the objective has its column there already
            for name in ("tasks", "full_fidelity", "columns", "frame", "empty_columns", "_task_counts"):
                if name in other.__dict__:
                    self.__dict__[name] = other.__dict__[name]

    def _carry(self, before: HistoryView, start: int) -> None:
        """Take over what ``before`` (this view's first ``start`` records) computed and the new records keep."""
        known = before.__dict__
        new = self.records[start:]
        if "tasks" in known:
            seen = {task_key(t): t for t in before.tasks}
            fresh = {k: dict(r.task_parameter) for r in new if (k := task_key(r.task_parameter)) not in seen}
            if not fresh:
                self.tasks = before.tasks
            else:
                try:
                    self.tasks = [{**seen, **fresh}[k] for k in sorted({**seen, **fresh})]
                except TypeError:  # values that do not sort: the order they first appear in, read again
                    pass
        if "full_fidelity" in known:
            levels = [r.raytuner.fidelity for r in new if r.raytuner and r.raytuner.fidelity is not None]
            highest = [v for v in (before.full_fidelity, *levels) if v is not None]
            self.full_fidelity = max(highest) if highest else None
        if "columns" in known:
            names = {kind: set(columns) for kind, columns in before.columns.items()}
            if all(
                set(r.task_parameter) <= names["task"]
                and set(r.tuning_parameter) <= names["parameter"]
                and set(r.evaluation_result) <= names["output"]
                for r in new
            ):
                self.columns = before.columns
                if "frame" in known:
                    self._carry_frame(before, new)
        if "_best_rows" in known and self.full_fidelity == before.full_fidelity:
            held = {task_key(t): n for t, n in zip(before.tasks, before._best_rows) if n is not None}
            self._best_rows = self._best_after(held, start)

    def _carry_frame(self, before: HistoryView, new: Sequence[FunctionEvaluation]) -> None:
        """:attr:`frame` as ``before``'s and the rows of ``new``, when each column keeps its type (else built later)."""
        frame = before.frame
        if not new:
            self.frame = frame
            for name in ("empty_columns", "_task_counts"):
                if name in before.__dict__:
                    self.__dict__[name] = before.__dict__[name]
            return
        rows = self._rows(new)
        if list(rows.columns) != list(frame.columns):
            return
        types = {c: frame[c].dtype for c in frame.columns if rows[c].dtype != frame[c].dtype}
        if types:
            if any(rows[c].notna().any() or types[c].kind in "biu" for c in types):
                return  # a column of one type gets values of another: the whole table is built again
            rows = rows.astype(types)  # all missing in the new rows: missing values of the table's type
        self.frame = pd.concat([frame, rows], ignore_index=True)
        if "empty_columns" in before.__dict__:
            self.empty_columns = before.empty_columns & _empty_columns(rows)
        if "_task_counts" in before.__dict__:
            counts = dict(before._task_counts)
            for label, (evaluations, failed, cost) in _counts(rows).items():
                held = counts.get(label, (0, 0, 0.0))
                counts[label] = (held[0] + evaluations, held[1] + failed, held[2] + cost)
            self._task_counts = counts

    def best_table(self) -> pd.DataFrame:
        """One row per task: its :meth:`best` evaluation's row of :attr:`frame` (NaN where none), plus counts.

        ``evaluations``, ``failed`` and ``total_cost`` count every evaluation of
        the task, at any fidelity (an evaluation without a cost counts 1).
        """
        return self._best.copy()

    @cached_property
    def _task_counts(self) -> dict[str, tuple[int, int, float]]:
        """Per task label: its evaluations, the failed ones, the cost spent (an evaluation without a cost: 1)."""
        return _counts(self.frame)

    @cached_property
    def _best(self) -> pd.DataFrame:
        frame = self.frame
        counts = self._task_counts
        rows = []
        for task, index in zip(self.tasks, self._best_rows):
            label = task_label(task)
            if index is not None:
                row = frame.iloc[index].to_dict()
            else:
                row = {c: float("nan") for c in frame.columns}
                row.update({"task": label, **{k: v for k, v in task.items() if k in frame.columns}})
            evaluations, failed, cost = counts.get(label, (0, 0, 0.0))
            row.update({"evaluations": evaluations, "failed": failed, "total_cost": cost})
            rows.append(row)
        return pd.DataFrame(rows, columns=[*frame.columns, "evaluations", "failed", "total_cost"])

    def _full_fidelity_rows(self) -> pd.Series:
        """Per row of :attr:`frame`, :meth:`is_full_fidelity` of its evaluation."""
        fidelity = pd.to_numeric(self.frame["fidelity"], errors="coerce")
        if self.full_fidelity is None:
            return pd.Series(True, index=self.frame.index)
        close = np.isclose(fidelity.fillna(-math.inf), self.full_fidelity, rtol=1e-9, atol=0.0)
        return fidelity.isna() | pd.Series(close, index=self.frame.index)

    def best_so_far(self) -> pd.DataFrame:
        """Per task, after each of its evaluations: the running best at full fidelity and the cost spent.

        Columns: ``task``, ``evaluation`` (1, 2, ... within the task), ``cost``
        (normalised cost spent by the task so far; an evaluation without a
        cost counts 1), ``value`` (this evaluation's objective, NaN when failed
        or below full fidelity) and ``best`` (NaN until the first full-fidelity
        success).
        """
        frame = self.frame
        column = self.objective_column
        full = self._full_fidelity_rows()
        out = pd.DataFrame({"task": frame["task"], "value": frame[column].where(full)})
        out["evaluation"] = out.groupby("task", sort=False).cumcount() + 1
        out["cost"] = pd.to_numeric(frame["cost"], errors="coerce").fillna(1.0).groupby(frame["task"]).cumsum()
        running = self._ranked(out["value"]).groupby(out["task"], sort=False).cummin()
        running = running.groupby(out["task"], sort=False).ffill()  # a failure keeps the best so far
        out["best"] = self._ranked(running)
        return out[["task", "evaluation", "cost", "value", "best"]]

    def pareto_front(self, task: Mapping[str, Any]) -> list[FunctionEvaluation]:
        """The task's evaluations at full fidelity that meet the output constraints and no other one dominates.

        Without a problem it is the task's best evaluation.

        Args:
            task: The task.
        """
        if self.problem_space is None:
            best = dict(zip((task_key(t) for t in self.tasks), self.best_per_task())).get(task_key(task))
            return [best] if best is not None else []
        return pareto_front(self.problem_space, [r for r in self.records if self.is_full_fidelity(r)], task)

    def summary(self) -> dict[str, Any]:
        """What ``raytuner history show`` prints: the objective, goal and per task its best and counts."""
        tasks = []
        for task, record, (_, row) in zip(self.tasks, self.best_per_task(), self._best.iterrows()):
            tasks.append(
                {
                    "task": task,
                    "evaluations": int(row["evaluations"]),
                    "failed": int(row["failed"]),
                    "total_cost": round(float(row["total_cost"]), 6),
                    "best": None
                    if record is None
                    else {
                        "value": record.value(self.objective),
                        "config": record.tuning_parameter,
                        "fidelity": record.raytuner.fidelity if record.raytuner else None,
                        "uid": record.uid,
                    },
                }
            )
        return {
            "problem": self.problem,
            "objective": self.objective,
            "goal": self.goal,
            "goal_source": self.goal_source,
            "evaluations": len(self.records),
            "models": len(self.models),
            "full_fidelity": self.full_fidelity,
            "tasks": tasks,
        }


def _objective_of(records: Sequence[FunctionEvaluation], problem: ProblemSpace | None, objective: str | None) -> str:
    names = list(dict.fromkeys(k for r in records for k in r.evaluation_result))
    if problem is not None:
        chosen = problem.objective(objective).name
    elif objective is not None:
        chosen = objective
    else:
        return names[0] if names else "y"
    if records and chosen not in names:
        raise InvalidInputError("objective", f"{chosen!r} is no output of these evaluations", allowed=names)
    return chosen


def _is_session(source: Any) -> TypeGuard[TuningSession]:
    """Whether ``source`` is a :class:`TuningSession` (there is none while its module was never imported)."""
    module = sys.modules.get("raytuner.session.tuning_session")
    return module is not None and isinstance(source, module.TuningSession)


def read_history(source: Any, problem: str | None = None, problem_space: ProblemSpace | None = None) -> HistoryDocument:
    """One problem's records from any source :func:`load_history` takes, as a document (a read never writes).

    Args:
        source: a store directory or ``mongodb://`` URI, a GPTune file, an open
            :class:`~raytuner.store.HistoryStore`, a :class:`~raytuner.problem.records.HistoryDocument`
            or a :class:`~raytuner.session.tuning_session.TuningSession`.
        problem: the problem's name (needed when a store holds several; a file's must match).
        problem_space: types an older GPTune file's string values (default: inferred, with a note).

    >>> read_history(HistoryDocument(tuning_problem_name="p")).tuning_problem_name
    'p'
    """
    if isinstance(source, HistoryDocument):
        return source
    if _is_session(source):
        return HistoryDocument(
            tuning_problem_name=source.problem_name,
            func_eval=source.records,
            surrogate_model=source.store.models(source.problem_name),
        )
    if isinstance(source, HistoryStore):
        return source.export_document(problem_in(source, problem, "the store"))
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidInputError(
            "source",
            f"cannot read a history from {type(source).__name__}",
            allowed=[
                "store directory",
                "mongodb:// URI",
                "GPTune file",
                "HistoryStore",
                "HistoryDocument",
                "TuningSession",
            ],
        )
    location = os.fspath(source)
    if not is_mongodb_uri(location) and os.path.isfile(location):
        document = read_history_file(location, problem_space)
        if problem is not None and problem != document.tuning_problem_name:
            raise InvalidInputError(
                "problem",
                f"{location} holds problem {document.tuning_problem_name!r}",
                allowed=[document.tuning_problem_name],
            )
        return document
    if not is_mongodb_uri(location) and not os.path.isdir(location):
        raise InvalidInputError("", f"{location}: does not exist")
    with open_store(location) as store:
        return store.export_document(problem_in(store, problem, location))


def problem_in(store: HistoryStore, problem: str | None, where: str) -> str:
    """``problem`` when ``store`` holds it, or the store's only problem when ``problem`` is ``None``.

    An unknown or missing name is :class:`~raytuner.errors.InvalidInputError` on the field
    ``problem``, listing the problems the store holds: every command that takes a problem
    answers the same.

    Args:
        store: an open store.
        problem: the problem's name (``None``: the store's only problem).
        where: names the store in the error (its directory or URI).

    >>> from raytuner.store import JsonStore
    >>> problem_in(JsonStore("/nonexistent/raytuner-doctest"), "demo", "st")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: problem: no problem 'demo' in st (it holds none)
    """
    names = store.problems()
    if problem is not None:
        check_problem_name(problem, "problem")
        if problem not in names:
            held = "" if names else " (it holds none)"
            raise InvalidInputError("problem", f"no problem {problem!r} in {where}{held}", allowed=names)
        return problem
    if len(names) == 1:
        return names[0]
    if not names:
        raise InvalidInputError("problem", f"{where} holds no tuning problem")
    raise InvalidInputError("problem", f"{where} holds several problems; choose one", allowed=list(names))


def load_history(
    source: Any,
    problem: str | None = None,
    *,
    objective: str | None = None,
    problem_space: ProblemSpace | None = None,
    goal: Goal | None = None,
) -> HistoryView:
    """Read one problem's history as a :class:`HistoryView` (a read never writes).

    Args:
        source: anything :func:`read_history` reads.
        problem: the problem's name (needed when a store holds several).
        objective: the output the best values are of (default: the problem's first objective, or
            the first output the evaluations have).
        problem_space: the problem, for the objective's goal, the Pareto front and an older file's types
            (default: the session's; else the goal is read from the newest stored model).
        goal: ``minimize`` or ``maximize``, overriding the problem's and the model's.

    >>> from raytuner.problem.records import HistoryDocument
    >>> load_history(HistoryDocument(tuning_problem_name="empty"))
    HistoryView(problem='empty', evaluations=0, tasks=0, objective='y', goal='minimize')
    """
    if goal is not None and goal not in ("minimize", "maximize"):
        raise InvalidInputError("goal", f"{goal!r} is not a goal", allowed=["minimize", "maximize"])
    if problem_space is None and _is_session(source):
        problem_space = source.problem  # a session knows its problem
    document = read_history(source, problem, problem_space)
    name, records, models = document.tuning_problem_name, list(document.func_eval), list(document.surrogate_model)
    chosen = _objective_of(records, problem_space, objective)
    found: tuple[Goal | None, str] = (goal, "argument")
    if found[0] is None and problem_space is not None:
        found = (problem_space.objective(chosen).goal, "problem")
    if found[0] is None:
        found = (_goal_from_models(models, chosen), "model")
    resolved: Goal = found[0] or "minimize"
    view = HistoryView(
        name,
        records,
        models,
        chosen,
        resolved,
        found[1] if found[0] else "default",
        problem_space if problem_space is not None else _space_from_models(models),
    )
    view._space_from_models = problem_space is None
    view._objective_from_records = problem_space is None and objective is None
    return view
