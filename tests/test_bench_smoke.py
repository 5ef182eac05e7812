"""A tiny run of every benchmark workload (100 rows), so the benchmarks cannot rot."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def run_bench(module: str, *args: str, database: str) -> subprocess.CompletedProcess:
    """``python -m <module> <args>`` on its own bench database ``database`` (per process); fails on a non-zero exit."""
    env = dict(os.environ, BENCH_PG_NAME=f"{database}_{os.getpid()}", PYTHONPATH=str(ROOT))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=280
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.timeout(300)
def test_bench_smoke_runs_every_workload(tmp_path):
    out = tmp_path / "bench.json"
    proc = run_bench(
        "bench", "--smoke", "--no-peers", "--db", settings.DB, "--json", str(out),
        database="agent_sessions_bench_smoke",
    )  # fmt: skip
    rows = json.loads(out.read_text())
    workloads = {r["workload"].split(".")[0] for r in rows}
    http = {"7"} if settings.DB == "postgres" else set()  # gunicorn against the bare endpoints: Postgres only
    assert workloads == {"1", "2", "3a", "3b", "3c", "3d", "4", "5", "6", "8"} | http
    assert "finish (append + record) ÷ bare append_message" in proc.stdout
    assert {r["impl"] for r in rows} >= {"ours", "raw SQL"}
    assert "ours ÷ this" in proc.stdout
    # the manager's append beside the session's, with its goal row
    assert "ours, SessionManager.append" in {r["impl"] for r in rows if r["workload"].startswith("1.")}
    assert "SessionManager.append ÷ Session.append_message" in proc.stdout
    # the window within a byte budget, read with and without the size it had last time, with its goal rows
    within = {r["impl"] for r in rows if r["workload"].startswith("3d.")}
    reading_on = {"ours, first read, reading on (before 0027)"} if settings.DB == "postgres" else set()
    assert within == {"ours", "ours, first read of the window", "raw SQL", "raw range scan"} | reading_on
    assert "recent window within a byte budget ÷ raw range scan" in proc.stdout
    if settings.DB == "postgres":  # the last-50 read also on prepared-statement connections, with its goal row
        last50 = {r["impl"] for r in rows if r["workload"].startswith("3b.")}
        generic = "raw range scan, prepared, force_generic_plan"
        assert {"ours, prepared statements", "raw range scan, prepared statements", generic} <= last50
        assert "(raw range scan, prepared statements)" in proc.stdout
        assert f"({generic})" in proc.stdout  # the floor a prepared range scan reaches, with its goal row
        plans = [r["extra"].get("plans", "") for r in rows if r["impl"] == "raw range scan, prepared statements"]
        assert re.fullmatch(r"\d+ generic, \d+ custom", plans[0]), plans  # which plans Postgres chose
        appends = {r["impl"] for r in rows if r["workload"].startswith("1.")}
        assert "ours, SessionManager.append, prepared" in appends  # the manager with server-bound parameters
        assert "(ours, prepared statements)" in proc.stdout  # ... and its goal row


@pytest.mark.timeout(300)
@pytest.mark.postgres_only  # bench.scale compares PostgreSQL layouts
def test_bench_scale_smoke(tmp_path):
    out = tmp_path / "scale.json"
    proc = run_bench(
        "bench.scale", "--messages", "3000", "--small", "1500", "--sessions", "20", "--partitions", "4",
        "--rounds", "1", "--json", str(out), database="agent_sessions_bench_scale_smoke",
    )  # fmt: skip
    report = json.loads(out.read_text())
    assert [(r["layout"], r["rows"]) for r in report["runs"]] == [
        ("plain", 1500),
        ("partitioned", 1500),
        ("plain", 3000),
        ("partitioned", 3000),
    ]
    for run in report["runs"]:
        assert set(run["medians_s"]) == {
            "append (ordinary session)",
            "append (1,000-deep session)",
            "history of a 1,000-deep path",
            "per-session search",
            "cross-session search",
        }
        assert run["table_bytes"] > 0
        assert run["indexes_bytes"] > run["table_bytes"] / 10
        assert run["load_s"] >= 0
    assert "large ÷ small" in proc.stdout


@pytest.mark.timeout(300)
@pytest.mark.postgres_only  # workload 9 measures Postgres, directly and through the latency proxy
def test_bench_async_load_smoke():
    proc = run_bench(
        "bench.async_load", "--turns", "2", "--rounds", "1", "--concurrency", "1,4", "--latency", "0,1",
        "--threads", "2", "--drop", "--no-peers", database="agent_sessions_bench_async_smoke",
    )  # fmt: skip
    row = r"^  (9\. async C=\d+, [\d.]+ ms)\s+(.+?)\s+([\d,]+) ops/s\s+(\d+) connections$"
    rows = [(label, impl.strip(), int(peak)) for label, impl, _, peak in re.findall(row, proc.stdout, re.M)]
    seen = {(label, impl) for label, impl, _ in rows}
    for label in ("9. async C=1, 0 ms", "9. async C=4, 0 ms", "9. async C=1, 1 ms", "9. async C=4, 1 ms"):
        assert {(label, "ours"), (label, "ours, AgentsSession")} <= seen
    assert ("9. async C=1, 0 ms", "ours, before (sync_to_async)") in seen
    assert all(peak <= 2 for _, impl, peak in rows if impl in ("ours", "ours, AgentsSession"))  # --threads 2


@pytest.mark.timeout(300)
@pytest.mark.postgres_only  # bench.live_events measures both databases and serves the SSE side from Postgres
def test_bench_live_events_smoke(tmp_path):
    out = tmp_path / "live.json"
    run_bench(
        "bench.live_events", "--appends", "100", "--samples", "5", "--subscribers", "5", "--resumes", "2",
        "--json", str(out), database="agent_sessions_bench_live_smoke",
    )  # fmt: skip
    report = json.loads(out.read_text())
    for database in ("sqlite", "postgres"):
        assert report[f"append_{database}"]["ratio"] > 0
    assert report["goal_append_ratio"] == 1.05
    sse = report["sse"]
    assert sse["samples"] == 5
    assert sse["idle_subscribers"] == 5
    assert sse["commit_to_sse_median_ms"] > 0
    assert sse["kib_per_idle_subscriber"] is not None
    assert sse["chat_resume_rounds"] == 2
    assert sse["chat_resumed_over_fresh"] > 0
