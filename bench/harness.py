"""Timing, rounds, medians and the result table."""

from __future__ import annotations

import gc
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Result:
    """One measured (workload, database, implementation) cell."""

    workload: str
    database: str
    impl: str
    median_s: float
    rounds: int
    extra: dict[str, Any] = field(default_factory=dict)
    series: list[tuple[float, float]] = field(default_factory=list)
    """Points ``(x, seconds)`` for the charts (per-append latency by session size, read time by depth)."""


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def median_of(fn: Callable[[], Any], rounds: int, setup: Callable[[], Any] | None = None) -> float:
    """Median wall time of ``fn`` over ``rounds`` runs (``setup`` runs untimed before each)."""
    times = []
    for _ in range(rounds):
        if setup:
            setup()
        times.append(timed(fn)[0])
    return statistics.median(times)


def interleaved_medians(
    fns: dict[str, Callable[[], Any]], rounds: int, seed: int = 1
) -> dict[str, tuple[float, float]]:
    """``{name: (median wall time, median CPU time of this process)}``, each function timed once in
    every round, in a fresh seeded order, so a change of load on a shared machine hits every
    implementation alike and none always runs on the caches one particular other has just left.
    CPU time is what an in-process database (SQLite) costs without the wait for a core.

    Why the order changes: with one fixed order ``ours`` always follows the SQLAlchemy peer in the
    last-50 read, which makes up about half of its gap to the raw range scan on Postgres."""
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    order = random.Random(seed)
    items = list(fns.items())
    for _ in range(rounds):
        for name, fn in order.sample(items, len(items)):
            # Outside the timer: a full collection, which the garbage of a 10,000-message read
            # triggers now and then in a heap the peers' imports made large, is not charged to
            # whichever implementation happened to run into it.
            gc.collect()
            start = time.process_time()
            wall[name].append(timed(fn)[0])
            cpu[name].append(time.process_time() - start)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in fns}


def cpu_note(cpu: float, reference_cpu: float | None) -> dict[str, str]:
    """The ``extra`` of a result timed with :func:`interleaved_medians`: its CPU time and ours ÷ it."""
    note = {"cpu": f"{cpu * 1000:.2f} ms"}
    if reference_cpu:
        note["ours cpu ÷ this"] = f"{reference_cpu / cpu:.2f}" if cpu else "inf"
    return note


def per_op_medians(times: list[float], window: int) -> tuple[float, float]:
    """Median of the first and of the last ``window`` per-operation timings."""
    window = max(1, min(window, len(times) // 2 or 1))
    return statistics.median(times[:window]), statistics.median(times[-window:])


def binned(times: list[float], bins: int = 200) -> list[tuple[float, float]]:
    """``times`` (one per operation, in order) as ``bins`` points ``(operation index, median of its bin)``."""
    if not times:
        return []
    size = max(1, len(times) // bins)
    return [(start + size / 2, statistics.median(times[start : start + size])) for start in range(0, len(times), size)]


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def print_table(results: list[Result]) -> None:
    """Rows grouped by workload and database; ratio = ours ÷ each reference."""
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.workload, r.database), []).append(r)
    header = f"{'workload':<44} {'db':<9} {'impl':<26} {'median':>10} {'ours ÷ this':>12}"
    print(header)
    print("-" * len(header))
    for (workload, database), rows in groups.items():
        ours = next((r for r in rows if r.impl == "ours"), None)
        for r in rows:
            ratio = "" if ours is None or r is ours or r.median_s == 0 else f"{ours.median_s / r.median_s:.2f}"
            note = "  " + ", ".join(f"{k}={v}" for k, v in r.extra.items()) if r.extra else ""
            print(f"{workload:<44} {database:<9} {r.impl:<26} {fmt_time(r.median_s):>10} {ratio:>12}{note}")
        print()


def dump_json(results: list[Result], path: str, **about: Any) -> None:
    """The results as a JSON list of rows; ``about`` (goals, machine), if given, beside it in ``<name>.goals.json``."""
    Path(path).write_text(json.dumps([asdict(r) for r in results], indent=2, default=str), encoding="utf-8")
    if about:
        Path(path).with_suffix(".goals.json").write_text(json.dumps(about, indent=2, default=str), encoding="utf-8")


def script_main(argv: list[str], run: Callable[[int, str], object], default_size: int) -> None:
    """``python -m bench.<name> [size] [database]``: Django on ``bench.settings``, migrate, then ``run``."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django
    from django.core.management import call_command

    django.setup()
    size = int(argv[0]) if argv else default_size
    using = argv[1] if len(argv) > 1 else "default"
    call_command("migrate", database=using, verbosity=0)
    run(size, using)
