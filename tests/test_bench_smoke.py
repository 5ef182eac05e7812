"""A tiny run of every benchmark workload (100 rows), so the benchmarks cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(300)
def test_bench_smoke_runs_every_workload(tmp_path):
    out = tmp_path / "bench.json"
    env = dict(os.environ, BENCH_PG_NAME=f"agent_sessions_bench_smoke_{os.getpid()}", PYTHONPATH=str(ROOT))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--no-peers", "--db", settings.DB, "--json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    workloads = {r["workload"].split(".")[0] for r in rows}
    assert workloads == {"1", "2", "3a", "3b", "4", "5", "6"}
    assert {r["impl"] for r in rows} >= {"ours", "raw SQL"}
    assert "ours ÷ this" in proc.stdout
