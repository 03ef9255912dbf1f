"""The dashboard on a store that grows while it shows it: only what is new is read, and folded into its view.

- after appends, a damaged journal line (skipped, then quarantined by a compaction) and a rewritten file,
  the view the dashboard folded is the view a full read gives;
- while one page reads a problem, or a rewritten file is read whole in the background, pages are served
  the last complete view;
- a live poll after an append shows the new record;
- reading writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from raytuner.dashboard import create_app
from raytuner.dashboard.sources import StoreViews
from raytuner.problem.records import FunctionEvaluation, HistoryDocument, Provenance, SurrogateModelRecord
from raytuner.problem.space import ProblemSpace
from raytuner.store import JsonStore, StoreChanges, write_history_file
from raytuner.view import HistoryView, load_history


def _records(start: int, n: int, tasks: int = 3) -> list[FunctionEvaluation]:
    """Evaluations ``start`` to ``start + n``: several tasks and fidelities, every seventh one failed."""
    out = []
    for i in range(start, start + n):
        provenance = Provenance(engine="random", fidelity=float(1 + i % 3), cost=0.5 + i % 2, trial_id=f"trial-{i}")
        y = None if i % 7 == 3 else {"y": ((i * 7919) % 1009) / 1009, "z": float(i % 5)}
        out.append(
            FunctionEvaluation.create({"t": float(i % tasks)}, {"x": (i * 37 % 101) / 101}, y, provenance=provenance)
        )
    return out


def _same(folded: HistoryView, full: HistoryView) -> None:
    """The two views show the same history: records, tasks, table, best per task, best-so-far curves."""
    assert [r.uid for r in folded.records] == [r.uid for r in full.records]
    assert [m.uid for m in folded.models] == [m.uid for m in full.models]
    assert folded.tasks == full.tasks
    assert (folded.objective, folded.goal, folded.full_fidelity) == (full.objective, full.goal, full.full_fidelity)
    pd.testing.assert_frame_equal(folded.frame, full.frame)
    assert folded.empty_columns == full.empty_columns
    pd.testing.assert_frame_equal(folded.best_table(), full.best_table())
    pd.testing.assert_frame_equal(folded.best_so_far(), full.best_so_far())


def _full(folder: Path) -> HistoryView:
    with JsonStore(folder) as store:
        return load_history(store, "demo")


def _files(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file of the folder: its size, modification time and content's hash."""
    return {
        p.name: (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.iterdir())
    }


def test_appends_are_folded_into_the_view_a_full_read_gives(tmp_path: Path) -> None:
    writer = JsonStore(tmp_path)
    writer.append_many("demo", _records(0, 40))
    writer.compact("demo")  # the GPTune file, then a journal beside it
    views = StoreViews(tmp_path)
    first = views.view("demo")
    first.best_so_far()
    writer.append_many("demo", _records(40, 5))
    for record in _records(45, 4, tasks=5):  # two new tasks, one at a new highest fidelity
        writer.append("demo", record)
    writer.append("demo", _records(3, 1)[0])  # a repeated uid: kept once, as every read does
    folded = views.view("demo")
    assert folded is not first and len(first.records) == 40, "the earlier view stays as it was"
    assert folded.records[0] is first.records[0], "only what was appended was read"
    _same(folded, _full(tmp_path))
    assert views.view("demo") is folded, "nothing new: the same view"
    of_z = views.view_of("demo", "z")
    writer.append_many("demo", _records(60, 3))
    folded_z = views.view_of("demo", "z")
    assert folded_z.records[0] is of_z.records[0] and folded_z.frame is views.view("demo").frame
    with JsonStore(tmp_path) as store:
        _same(folded_z, load_history(store, "demo", objective="z"))
    writer.close()


def _spaces_model(z_bound: float | None) -> SurrogateModelRecord:
    """A stored model that keeps the problem's spaces: outputs y and z, z bounded above by ``z_bound`` where given."""
    space = ProblemSpace.parse(
        {
            "task_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 10}],
            "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
            "output_space": [{"name": "y"}, {"name": "z", **({"upper_bound": z_bound} if z_bound is not None else {})}],
        }
    )
    return SurrogateModelRecord(modeler="raytuner_LCM", raytuner={"spaces": space.model_dump()})


def test_another_objective_s_view_takes_the_problem_a_new_model_keeps(tmp_path: Path) -> None:
    with JsonStore(tmp_path) as writer:
        writer.append_many("demo", _records(0, 20))
        writer.append_model("demo", _spaces_model(None))
        views = StoreViews(tmp_path)
        views.view_of("demo", "z")
        writer.append_model("demo", _spaces_model(0.5))  # a later run bounds z
        writer.append("demo", _records(20, 1)[0])
        folded = views.view_of("demo", "z")
        assert folded.problem_space == views.view("demo").problem_space
        _same(folded, load_history(writer, "demo", objective="z", problem_space=folded.problem_space))


def test_a_new_column_and_a_new_type_are_built_again_when_asked_for(tmp_path: Path) -> None:
    with JsonStore(tmp_path) as writer:
        writer.append_many("demo", _records(0, 10))
        views = StoreViews(tmp_path)
        views.view("demo")
        writer.append("demo", FunctionEvaluation.create({"t": 0.0}, {"x": 0.5, "w": "b"}, {"y": 0.1, "extra": 2.0}))
        _same(views.view("demo"), _full(tmp_path))
        writer.append("demo", FunctionEvaluation.create({"t": 0.0}, {"x": 1, "w": 3}, {"y": 0.2, "extra": 1}))
        _same(views.view("demo"), _full(tmp_path))


def test_a_damaged_journal_line_is_skipped_and_then_its_quarantine_read_whole(tmp_path: Path) -> None:
    writer = JsonStore(tmp_path)
    writer.append_many("demo", _records(0, 20))
    views = StoreViews(tmp_path)
    views.view("demo")
    with open(tmp_path / "demo.json.journal", "ab") as fh:
        fh.write(b'{"kind": "func_eval", "record": {"uid": \x00\x01}\n')  # a flipped byte's line
    writer.append("demo", _records(20, 1)[0])
    folded = views.view("demo")
    assert len(folded.records) == 21
    _same(folded, _full(tmp_path))
    writer.compact("demo")  # the damaged line goes to demo.json.corrupt, the GPTune file is rewritten
    assert (tmp_path / "demo.json.corrupt").exists()
    writer.append("demo", _records(21, 1)[0])
    assert views.view("demo") is folded, "read whole in the background: the last view meanwhile"
    views.wait_for_reads()
    reread = views.view("demo")
    assert reread.records[0] is not folded.records[0], "a rewritten file is read whole"
    _same(reread, _full(tmp_path))
    writer.close()


def test_a_rewritten_or_replaced_file_is_read_whole(tmp_path: Path) -> None:
    writer = JsonStore(tmp_path)
    writer.append_many("demo", _records(0, 30))
    views = StoreViews(tmp_path)
    views.view("demo")
    writer.close()  # the last writer compacts: the journal is folded into the file and removed
    views.view("demo")
    views.wait_for_reads()
    closed = views.view("demo")
    _same(closed, _full(tmp_path))
    kept = HistoryDocument(tuning_problem_name="demo", func_eval=_records(100, 12))
    write_history_file(tmp_path / "demo.json", kept)  # another file in its place, of fewer records
    views.view("demo")
    views.wait_for_reads()
    replaced = views.view("demo")
    assert [r.uid for r in replaced.records] == [r.uid for r in kept.func_eval]
    _same(replaced, _full(tmp_path))


def test_a_view_with_constraints_folds_its_best_as_a_full_read_finds_it() -> None:
    space = ProblemSpace.parse(
        {
            "task_space": [{"name": "t", "type": "real", "lower_bound": 0, "upper_bound": 10}],
            "parameter_space": [{"name": "x", "type": "real", "lower_bound": 0, "upper_bound": 1}],
            "output_space": [{"name": "y", "goal": "maximize"}, {"name": "z", "upper_bound": 3}],
        }
    )
    records = _records(0, 55)
    first = load_history(HistoryDocument(tuning_problem_name="demo", func_eval=records[:30]), problem_space=space)
    first.best_table()
    full = load_history(HistoryDocument(tuning_problem_name="demo", func_eval=records), problem_space=space)
    _same(first.extended(records[30:]), full)


def test_a_problem_first_read_without_evaluations_takes_the_objective_a_full_read_takes(tmp_path: Path) -> None:
    with JsonStore(tmp_path) as writer:
        writer.append_model("demo", SurrogateModelRecord(modeler="Model_LCM"))  # a model before any evaluation
        views = StoreViews(tmp_path)
        assert views.view("demo").records == []
        writer.append_many(
            "demo", [FunctionEvaluation.create({"t": 1.0}, {"x": x}, {"runtime": x + 1.0}) for x in (0.2, 0.1)]
        )
        folded = views.view("demo")
        _same(folded, _full(tmp_path))
        assert folded.objective == "runtime" and folded.best_table()["runtime"].tolist() == [1.1]


def test_a_problem_renamed_away_is_no_longer_shown(tmp_path: Path) -> None:
    with JsonStore(tmp_path) as writer:
        writer.append_many("demo", _records(0, 10))
    client = create_app(store=tmp_path).test_client()
    assert client.get("/problem/demo").status_code == 200
    (tmp_path / "demo.json").rename(tmp_path / "renamed.json")
    assert client.get("/problem/demo").status_code == 404, "a problem gone from the store is not shown, empty"
    assert client.get("/problem/renamed").status_code == 200


class _GatedStore(JsonStore):
    """A JSON store whose reads of what is new wait, once armed, until the test lets them go on."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.armed, self.reading, self.go_on = False, threading.Event(), threading.Event()

    def changes_since(self, problem: str, cursor: Any = None) -> StoreChanges:
        if self.armed:
            self.reading.set()
            assert self.go_on.wait(timeout=60)
        return super().changes_since(problem, cursor)


def test_a_page_during_a_read_gets_the_last_complete_view(tmp_path: Path) -> None:
    with JsonStore(tmp_path) as writer:
        writer.append_many("demo", _records(0, 20))
        gated = _GatedStore(tmp_path)
        views = StoreViews(gated)
        complete = views.view("demo")
        writer.append("demo", _records(20, 1)[0])
        gated.armed = True
        reader = threading.Thread(target=views.view, args=("demo",))
        reader.start()
        assert gated.reading.wait(timeout=60)  # the read of the new record is under way
        during = views.view("demo")
        gated.go_on.set()
        reader.join(timeout=60)
        assert during is complete and len(during.records) == 20
        assert len(views.view("demo").records) == 21


def test_a_compacted_file_is_read_whole_in_the_background_while_pages_get_the_last_view(tmp_path: Path) -> None:
    writer = JsonStore(tmp_path)
    writer.append_many("demo", _records(0, 20))
    gated = _GatedStore(tmp_path)
    views = StoreViews(gated)
    complete = views.view("demo")
    writer.append("demo", _records(20, 1)[0])
    writer.compact("demo")  # the GPTune file rewritten: the next read is a full one
    gated.armed = True
    assert views.view("demo") is complete  # answered at once, the full read started
    assert gated.reading.wait(timeout=60)
    assert views.view("demo") is complete  # the read still under way
    gated.go_on.set()
    views.wait_for_reads()
    assert len(views.view("demo").records) == 21
    writer.close()


def test_a_live_poll_after_an_append_shows_the_new_record(tmp_path: Path) -> None:
    with JsonStore(tmp_path) as writer:
        writer.append_many("demo", _records(0, 30))
        client = create_app(store=tmp_path).test_client()
        before = client.get("/problem/demo/live.json").get_json()
        newest = FunctionEvaluation.create({"t": 1.0}, {"x": 0.123456}, {"y": 0.5, "z": 1.0})
        writer.append("demo", newest)
        after = client.get("/problem/demo/live.json").get_json()
    assert (before["evaluations"], after["evaluations"]) == (30, 31)
    assert "0.123456" not in before["html"] and "0.123456" in after["html"]
    assert newest.uid in after["html"]  # its row links to the evaluation's page


def test_the_live_view_chooses_its_objective_and_its_poll_keeps_the_choice(tmp_path: Path) -> None:
    with JsonStore(tmp_path) as writer:
        writer.append_many("demo", _records(0, 30))
    client = create_app(store=tmp_path).test_client()
    page = client.get("/problem/demo/live").get_data(as_text=True)
    assert 'id="objectives"' in page and 'href="/problem/demo/live?objective=z"' in page
    chosen = client.get("/problem/demo/live?objective=z").get_data(as_text=True)
    assert "<b>z</b>" in chosen and '".json" + location.search' in chosen  # the poll asks about the same objective
    polled = client.get("/problem/demo/live.json?objective=z").get_json()["html"]
    assert "objective=z" in polled  # its chart and links are of z
    assert "objective=z" not in client.get("/problem/demo/live.json").get_json()["html"]


@pytest.mark.parametrize("writer_open", [True, False])
def test_reading_writes_nothing(tmp_path: Path, writer_open: bool) -> None:
    writer = JsonStore(tmp_path)
    writer.append_many("demo", _records(0, 20))
    writer.compact("demo")
    writer.append_many("demo", _records(20, 3))
    if not writer_open:
        writer.close()
    before = _files(tmp_path)
    client = create_app(store=tmp_path).test_client()
    for page in ("/", "/problem/demo", "/problem/demo/live.json", "/problem/demo/evaluations?sort=y"):
        assert client.get(page).status_code == 200, page
    assert _files(tmp_path) == before
    if writer_open:
        writer.append("demo", _records(23, 1)[0])
        written = _files(tmp_path)
        assert client.get("/problem/demo/live.json").get_json()["evaluations"] == 24
        assert _files(tmp_path) == written
        writer.close()


def test_the_overview_counts_a_large_problem_without_reading_it(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr("raytuner.dashboard.problems.OVERVIEW_READS", 10)
    with JsonStore(tmp_path) as writer:
        writer.append_many("demo", _records(0, 20))
        writer.compact("demo")
        writer.append_many("demo", _records(20, 2))
        writer.append_many("small", _records(0, 3))
    app = create_app(store=tmp_path)
    page = app.test_client().get("/").get_data(as_text=True)
    views = app.config["RAYTUNER"]["store"]
    assert "22" in page and "open it to read" in page
    assert views.evaluation_count("demo") == (22, None), "the large problem is counted, not read"
    assert views.evaluation_count("small")[1] is not None, "the small one is read"


def test_the_overview_counts_a_large_file_written_by_gptune_without_validating_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr("raytuner.dashboard.problems.OVERVIEW_READS", 10)
    records = [r.to_file() for r in _records(0, 20)]
    document = {"tuning_problem_name": "demo", "surrogate_model": [], "func_eval": records}
    (tmp_path / "demo.json").write_text(json.dumps(document, indent=4))  # as GPTune writes it: not a record a line
    client = create_app(store=tmp_path).test_client()
    validated: list[Any] = []
    validate = FunctionEvaluation.model_validate

    def counted(*args: Any, **kwargs: Any) -> FunctionEvaluation:
        validated.append(args[0])
        return validate(*args, **kwargs)

    monkeypatch.setattr(FunctionEvaluation, "model_validate", counted)
    for _ in range(2):
        page = client.get("/").get_data(as_text=True)
        assert '<td class="num">20</td>' in page and "open it to read" in page
    assert not validated, "each visit of the overview validated the large problem's every record"
    document["func_eval"] = [r.to_file() for r in _records(0, 25)]
    (tmp_path / "demo.json").write_text(json.dumps(document))  # another file in its place: counted again
    assert '<td class="num">25</td>' in client.get("/").get_data(as_text=True)
