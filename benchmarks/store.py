"""Store benchmark: durable single-record appends into the history stores.

Run it with::

    python -m benchmarks store --out DIR [--quick]

or ``benchmarks.run_benchmark("store", Path(DIR), quick=False)``. It writes
``DIR/results.json`` and ``DIR/report.md`` and logs progress and the final table
on the ``benchmarks.store`` logger.

What it measures, in one run on this machine:

- **JSON store** (:class:`~raytuner.store.JsonStore`, default settings, so
  auto-compaction is on): ``N`` = 10,000 realistic records (2,000 with
  ``--quick``), one ``append`` each, every one fsync'd before it returns.
  Appends/s (``N`` over the time spent inside ``append``, compactions
  included), p50/p99 append latency, the process's RSS after 10 %, 50 % and
  100 % of the appends, and the time a fresh store takes to read all
  records back. Goals: at least 1,000 durable appends/s, and memory that
  stays flat as the history grows.
- **Naive rewrite** (the peer): how GPTune itself keeps its history file --
  load the whole JSON, add the record, rewrite the whole file and fsync it --
  for ``M`` = 1,000 appends (300 with ``--quick``). Its appends/s, the mean
  append time of its first and last 10 % (it grows with the file: O(n²) in
  all), and the JSON store's speed-up over it at the same ``M`` (measured in
  this run too).
- **MongoDB store** (:class:`~raytuner.store.mongo_store.MongoStore` with
  journaled writes, against a real local ``mongod`` started by
  :class:`~raytuner.testing.mongod.LocalMongod`): ``N`` single appends from one
  client. Goal: at least 1,000 appends/s. When the server cannot start, the
  error is recorded in the results instead.

Records are built outside the timed region (the machine and software
configuration once, as :mod:`raytuner.problem.environment` captures them); only the
store call is timed. All data goes to a temporary directory that is removed
afterwards; the results name the file system it was on, since fsync cost
depends on it.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.report import machine_info, markdown_table, peak_rss_mb, percentile, publish, rss_mb
from raytuner.problem.environment import machine_configuration, software_configuration
from raytuner.problem.records import FunctionEvaluation, Provenance
from raytuner.store.json_store import JsonStore

__all__ = ["run", "GOAL_APPENDS_PER_S"]

log = logging.getLogger(__name__)

#: Appends per second each store should reach.
GOAL_APPENDS_PER_S = 1000.0

PROBLEM = "bench-store"
N_FULL, N_QUICK = 10_000, 2_000
NAIVE_FULL, NAIVE_QUICK = 1_000, 300
_SEED = 20240610


class RecordFactory:
    """Realistic ``func_eval`` records: a task, five tuning parameters, a result, provenance.

    The machine and software configuration are captured once, at construction.
    """

    def __init__(self, seed: int = _SEED) -> None:
        self.rng = random.Random(seed)
        self.machine = machine_configuration()
        self.software = software_configuration()
        self.session = str(uuid.uuid4())

    def __call__(self, i: int) -> FunctionEvaluation:
        rng = self.rng
        size = rng.choice([2000, 4000, 8000, 16000])
        return FunctionEvaluation.create(
            {"m": size, "n": size},
            {
                "mb": rng.randint(1, 16),
                "nb": rng.randint(1, 16),
                "npernode": rng.choice([1, 2, 4, 8, 16, 32]),
                "lookahead": round(rng.uniform(0.0, 1.0), 6),
                "algo": rng.choice(["lu", "qr", "cholesky"]),
            },
            {"runtime": rng.lognormvariate(0.0, 1.0)},
            provenance=Provenance(
                engine="gptune_mla", fidelity=1.0, cost=1.0, trial_id=f"trial_{i:06d}", session_id=self.session
            ),
            machine_configuration=self.machine,
            software_configuration=self.software,
        )


@dataclass
class Timing:
    """Per-append latencies (seconds) and RSS samples of one timed loop."""

    latencies: list[float] = field(default_factory=list)
    rss: dict[str, float | None] = field(default_factory=dict)
    rss_after_gc: dict[str, float | None] = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def total_s(self) -> float:
        return sum(self.latencies)

    def appends_per_s(self) -> float:
        return len(self.latencies) / self.total_s if self.total_s > 0 else float("inf")

    def summary(self) -> dict[str, Any]:
        ms = [x * 1e3 for x in self.latencies]
        return {
            "appends": len(ms),
            "appends_per_s": round(self.appends_per_s(), 1),
            "append_ms_p50": round(percentile(ms, 50), 4),
            "append_ms_p99": round(percentile(ms, 99), 4),
            "append_ms_max": round(max(ms), 3),
            "total_append_s": round(self.total_s, 3),
            "wall_s": round(self.wall_s, 3),
        }


def timed_appends(
    append: Callable[[FunctionEvaluation], None],
    n: int,
    make: RecordFactory,
    label: str,
    rss_at: dict[int, str] | None = None,
    observe: Callable[[int, float], None] | None = None,
) -> Timing:
    """Call ``append`` on ``n`` fresh records, timing each call.

    After the append counts in ``rss_at`` the RSS is sampled, then sampled again
    after a full garbage collection (what is still referenced, plus what the
    allocator keeps). ``observe(i, seconds)`` runs after each append, untimed.
    """
    timing = Timing()
    rss_at = rss_at or {}
    step = max(1, n // 10)
    start = time.perf_counter()
    for i in range(n):
        record = make(i)
        t0 = time.perf_counter()
        append(record)
        elapsed = time.perf_counter() - t0
        timing.latencies.append(elapsed)
        if observe is not None:
            observe(i, elapsed)
        done = i + 1
        if done in rss_at:
            timing.rss[rss_at[done]] = _round(rss_mb(), 1)
            gc.collect()
            timing.rss_after_gc[rss_at[done]] = _round(rss_mb(), 1)
        if done % step == 0:
            log.info("%s: %d/%d appends, %.0f appends/s so far", label, done, n, done / sum(timing.latencies))
    timing.wall_s = time.perf_counter() - start
    return timing


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _size_mb(path: Path) -> float:
    try:
        return round(path.stat().st_size / 2**20, 2)
    except FileNotFoundError:
        return 0.0


# -- the JSON store ---------------------------------------------------------------------------


def bench_json_store(
    directory: Path, n: int, make: RecordFactory, label: str = "json store", memory: bool = True
) -> dict[str, Any]:
    """``n`` durable appends into a fresh :class:`JsonStore` in ``directory``, then read them back.

    A compaction is seen as a new inode of the GPTune file after an append;
    the time of the appends that ran one is reported apart.
    """
    store = JsonStore(directory)
    main = store.path(PROBLEM)
    journal = main.with_name(main.name + ".journal")
    marks = {max(1, n // 10): "10%", max(1, n // 2): "50%", n: "100%"} if memory else None
    compactions: list[tuple[int, float, float]] = []  # (append number, seconds, GPTune file MiB)
    inode = [0]

    def observe(i: int, elapsed: float) -> None:
        try:
            st = main.stat()
        except FileNotFoundError:
            return
        if st.st_ino != inode[0]:
            inode[0] = st.st_ino
            compactions.append((i + 1, elapsed, st.st_size / 2**20))

    timing = timed_appends(lambda r: store.append(PROBLEM, r), n, make, label, marks, observe)
    peak = peak_rss_mb()
    result = timing.summary()
    compaction_s = sum(c[1] for c in compactions)
    result["compactions"] = len(compactions)
    result["compaction_s"] = round(compaction_s, 3)
    result["compaction_at_appends"] = [c[0] for c in compactions]
    result["compaction_max_s"] = round(max((c[1] for c in compactions), default=0.0), 3)
    steady = n - len(compactions)
    result["appends_per_s_without_compactions"] = (
        round(steady / (timing.total_s - compaction_s), 1) if steady and timing.total_s > compaction_s else None
    )
    result["gptune_file_mb"] = _size_mb(main)
    result["journal_mb"] = _size_mb(journal)

    reader = JsonStore(directory)  # a fresh store: nothing cached; reads the file and the journal
    t0 = time.perf_counter()
    count = len(reader.evaluations(PROBLEM))
    result["read_all_s"] = round(time.perf_counter() - t0, 3)
    if count != n:
        raise AssertionError(f"{label}: read {count} records back after {n} appends")

    t0 = time.perf_counter()
    store.close()  # the final compaction (before the reader's close, which would run it otherwise)
    result["close_s"] = round(time.perf_counter() - t0, 3)
    reader.close()
    result["gptune_file_mb_after_close"] = _size_mb(main)
    if memory:
        result["rss_mb"] = timing.rss
        low, high = timing.rss.get("10%"), timing.rss.get("100%")
        result["rss_growth_mb"] = None if low is None or high is None else round(high - low, 1)
        result["rss_after_gc_mb"] = timing.rss_after_gc
        low, high = timing.rss_after_gc.get("10%"), timing.rss_after_gc.get("100%")
        result["rss_after_gc_growth_mb"] = None if low is None or high is None else round(high - low, 1)
        result["rss_peak_mb"] = round(peak, 1)  # the process's highest RSS up to the last append
    return result


# -- the naive peer ---------------------------------------------------------------------------


def naive_rewrite_append(path: Path, record: FunctionEvaluation) -> None:
    """GPTune's way: load the whole history file, add the record, rewrite it and fsync it."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        data = {"tuning_problem_name": PROBLEM, "tuning_problem_category": None, "surrogate_model": [], "func_eval": []}
    data["func_eval"].append(record.to_file())
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2)
        fh.flush()
        os.fsync(fh.fileno())


def bench_naive(directory: Path, m: int, make: RecordFactory) -> dict[str, Any]:
    """``m`` naive whole-file rewrites; per-append time of the first and last 10 %."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{PROBLEM}.json"
    timing = timed_appends(lambda r: naive_rewrite_append(path, r), m, make, "naive rewrite")
    result = timing.summary()
    decile = max(1, m // 10)
    result["first_decile_ms"] = round(sum(timing.latencies[:decile]) / decile * 1e3, 3)
    result["last_decile_ms"] = round(sum(timing.latencies[-decile:]) / decile * 1e3, 3)
    result["file_mb"] = _size_mb(path)
    return result


# -- MongoDB ----------------------------------------------------------------------------------


def bench_mongodb(n: int, make: RecordFactory) -> dict[str, Any]:
    """``n`` single appends into a :class:`MongoStore` on a fresh local ``mongod``.

    Any failure (no server binary, server does not start, store module
    missing) is returned as ``{"appends": n, "error": ...}``.
    """
    try:
        from raytuner.store.mongo_store import MongoStore
        from raytuner.testing.mongod import LocalMongod
    except ImportError as exc:
        log.warning("MongoDB store benchmark skipped: %s", exc)
        return {"appends": n, "appends_per_s": None, "error": f"{type(exc).__name__}: {exc}"}
    try:
        with LocalMongod() as server:
            store = MongoStore(server.uri, database="raytuner_bench")
            try:
                timing = timed_appends(lambda r: store.append(PROBLEM, r), n, make, "mongodb store")
                result = timing.summary()
                t0 = time.perf_counter()
                count = len(store.evaluations(PROBLEM))
                result["read_all_s"] = round(time.perf_counter() - t0, 3)
            finally:
                store.close()
        if count != n:
            raise AssertionError(f"mongodb store: read {count} records back after {n} appends")
        return result
    except Exception as exc:  # a benchmark records the failure and goes on
        log.warning("MongoDB store benchmark failed: %s", exc)
        return {"appends": n, "appends_per_s": None, "error": f"{type(exc).__name__}: {exc}"}


# -- the run ----------------------------------------------------------------------------------


def run(out: Path, quick: bool = False) -> dict[str, Any]:
    """Run the store benchmark; write ``out/results.json`` and ``out/report.md``; return the results.

    Args:
        out: the folder for the results and the report (made if missing).
        quick: run the small workload instead of the full one (default ``False``).
    """
    n = N_QUICK if quick else N_FULL
    m = NAIVE_QUICK if quick else NAIVE_FULL
    workdir = Path(tempfile.mkdtemp(prefix="raytuner-bench-store-"))
    make = RecordFactory()
    sample = json.dumps(make(0).to_dict(), separators=(",", ":"))
    log.info(
        "store benchmark%s: %d JSON-store and MongoDB appends, %d naive rewrites; data in %s",
        " (quick)" if quick else "",
        n,
        m,
        workdir,
    )
    started = time.perf_counter()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    try:
        json_store = bench_json_store(workdir / "json", n, make)
        log.info(
            "json store: %.0f appends/s, p50 %.3f ms, p99 %.3f ms, RSS %s MiB",
            json_store["appends_per_s"],
            json_store["append_ms_p50"],
            json_store["append_ms_p99"],
            json_store["rss_mb"],
        )
        json_at_m = bench_json_store(workdir / "json-m", m, make, label="json store (peer size)", memory=False)
        naive = bench_naive(workdir / "naive", m, make)
        log.info(
            "naive rewrite: %.0f appends/s (first 10%% %.2f ms, last 10%% %.2f ms per append)",
            naive["appends_per_s"],
            naive["first_decile_ms"],
            naive["last_decile_ms"],
        )
        mongodb = bench_mongodb(n, make)
        machine = machine_info(workdir)
        machine["load_average_at_start"] = load_at_start  # other work on the machine skews the figures
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    speedup = json_at_m["appends_per_s"] / naive["appends_per_s"]
    growth = json_store.get("rss_growth_mb")
    # "flat": RSS grows by less than one compact-JSON copy of the records appended between the
    # 10 % and 100 % samples; a store that kept the records in memory would grow several times that
    flat_budget_mb = round((n - max(1, n // 10)) * len(sample) / 2**20, 1)
    results: dict[str, Any] = {
        "benchmark": "store",
        "quick": quick,
        "record_bytes": len(sample),
        "json_store": json_store,
        "json_store_at_naive_n": {
            k: json_at_m[k] for k in ("appends", "appends_per_s", "append_ms_p50", "append_ms_p99")
        },
        "naive_rewrite": naive,
        "json_vs_naive_speedup": round(speedup, 1),
        "json_rss_flat_budget_mb": flat_budget_mb,
        "mongodb_store": mongodb,
        "goals": {
            "json_appends_per_s_ge_1000": json_store["appends_per_s"] >= GOAL_APPENDS_PER_S,
            "json_rss_flat": growth is not None and growth <= flat_budget_mb,
            "mongodb_appends_per_s_ge_1000": (mongodb.get("appends_per_s") or 0.0) >= GOAL_APPENDS_PER_S,
        },
        "machine": machine,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    return publish(out, "store", results, render_report)


def _yes(flag: bool) -> str:
    return "met" if flag else "**missed**"


def render_report(results: dict[str, Any]) -> str:
    """The human summary: one table of figures with their goals, and the machine."""
    js, naive, mongo = results["json_store"], results["naive_rewrite"], results["mongodb_store"]
    peer, goals, machine = results["json_store_at_naive_n"], results["goals"], results["machine"]
    rss, gc_rss = js.get("rss_mb", {}), js.get("rss_after_gc_mb", {})
    rows: list[list[Any]] = [
        [
            "JSON store, durable appends",
            js["appends"],
            f"{js['appends_per_s']:,.0f}",
            js["append_ms_p50"],
            js["append_ms_p99"],
            f"≥ {GOAL_APPENDS_PER_S:,.0f}/s",
            _yes(goals["json_appends_per_s_ge_1000"]),
        ],
        [
            "JSON store at the peer's size",
            peer["appends"],
            f"{peer['appends_per_s']:,.0f}",
            peer["append_ms_p50"],
            peer["append_ms_p99"],
            "",
            "",
        ],
        [
            "naive rewrite (GPTune's way)",
            naive["appends"],
            f"{naive['appends_per_s']:,.0f}",
            naive["append_ms_p50"],
            naive["append_ms_p99"],
            "",
            "",
        ],
    ]
    if mongo.get("appends_per_s") is not None:
        rows.append(
            [
                "MongoDB store (journaled)",
                mongo["appends"],
                f"{mongo['appends_per_s']:,.0f}",
                mongo["append_ms_p50"],
                mongo["append_ms_p99"],
                f"≥ {GOAL_APPENDS_PER_S:,.0f}/s",
                _yes(goals["mongodb_appends_per_s_ge_1000"]),
            ]
        )
    else:
        rows.append(
            [
                "MongoDB store (journaled)",
                mongo["appends"],
                "failed",
                "",
                "",
                f"≥ {GOAL_APPENDS_PER_S:,.0f}/s",
                _yes(False),
            ]
        )
    table = markdown_table(["store", "appends", "appends/s", "p50 ms", "p99 ms", "goal", ""], rows)
    lines = [
        f"# Store benchmark{' (quick)' if results['quick'] else ''}",
        "",
        table,
        "",
        f"- JSON store memory (RSS): {rss.get('10%')} MiB at 10 %, {rss.get('50%')} MiB at 50 %, "
        f"{rss.get('100%')} MiB at 100 % of the appends: growth {js.get('rss_growth_mb')} MiB "
        f"(flat = less than the {results['json_rss_flat_budget_mb']} MiB of records appended in between): "
        f"{_yes(goals['json_rss_flat'])}. After a full GC: {gc_rss.get('10%')} / {gc_rss.get('50%')} / "
        f"{gc_rss.get('100%')} MiB; peak {js.get('rss_peak_mb')} MiB.",
        f"- JSON store compactions: {js['compactions']} (at appends {js['compaction_at_appends']}), "
        f"{js['compaction_s']} s in all, the longest {js['compaction_max_s']} s; without them "
        f"{js['appends_per_s_without_compactions']} appends/s"
        + (
            " (none ran: the journal stayed below the compaction threshold, so these figures leave "
            "compaction out; the full run includes it)."
            if not js["compactions"]
            else "."
        ),
        f"- JSON store: reading all {js['appends']:,} records back takes {js['read_all_s']} s; "
        f"GPTune file {js['gptune_file_mb_after_close']} MiB after close ({js['close_s']} s).",
        f"- Speed-up over the naive rewrite at {naive['appends']:,} appends: "
        f"{results['json_vs_naive_speedup']}x; the naive append grows from {naive['first_decile_ms']} ms "
        f"(first 10 %) to {naive['last_decile_ms']} ms (last 10 %).",
    ]
    if mongo.get("error"):
        lines.append(f"- MongoDB store failed: {mongo['error']}")
    lines += [
        f"- Record size: {results['record_bytes']} bytes of compact JSON.",
        f"- Machine: {machine['cpu_model']}, {machine['cores']} cores, {machine['os']}, Python "
        f"{machine['python']}; data on {machine.get('data_filesystem', 'unknown')}; load average "
        f"{machine.get('load_average_at_start')} at the start.",
        "",
    ]
    return "\n".join(lines)
