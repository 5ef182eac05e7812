"""A tiny run of the chat benchmark (uvicorn, ChatView against the bare endpoints), so it cannot rot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.sqlite_only]


@pytest.mark.timeout(300)
def test_bench_chat_runs_and_prints_every_row():
    env = dict(os.environ, PYTHONPATH=str(ROOT), BENCH_CHAT_ROUNDS="3")
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "bench.chat", "20"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=280
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in ("ours, async respond", "ours, sync respond", "bare StreamingHttpResponse", "ours (store_reply)"):
        assert row in proc.stdout
    assert "÷ bare=" in proc.stdout
    assert "÷ append_message=" in proc.stdout
