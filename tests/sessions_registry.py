"""Named session configurations for the tests and the e2e Celery worker.

The worker imports this module through ``AGENT_SESSIONS_CONFIG_MODULES`` (see
``tests/worker_settings.py``); eager tests simply import it.  Sessions built here carry
their name (``Session.create(config_name=...)``), so their appends enqueue ``compact_session``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from agent_sessions import Session, create_compact_function, registry

SLOW = "tests-slow"
FAST = "tests-fast"
THRESHOLD = 150

FAILURES: list[BaseException] = []
"""Errors the fast summariser raises, one per call, before it succeeds (tests queue them)."""
ERRORS: list[BaseException] = []
"""What ``on_compaction_error`` of these configurations received."""


def slow_summarize(prompt: str) -> str:
    """A summariser that takes a while, so a test can see the append return first.

    While the file named by ``AGENT_SESSIONS_TEST_SUMMARY_HOLD`` exists it does not finish
    (up to 120 s): a test holds it to observe the state before the summary, without timing.
    """
    time.sleep(float(os.environ.get("AGENT_SESSIONS_TEST_SUMMARY_DELAY", "1.5")))
    hold = os.environ.get("AGENT_SESSIONS_TEST_SUMMARY_HOLD")
    deadline = time.monotonic() + 120
    while hold and Path(hold).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return "SLOW SUMMARY"


_FAILED_SO_FAR = [0]


def fast_summarize(prompt: str) -> str:
    if FAILURES:
        raise FAILURES.pop(0)
    # A worker process cannot share FAILURES: it fails its first N calls with a 503 instead.
    if _FAILED_SO_FAR[0] < int(os.environ.get("AGENT_SESSIONS_TEST_FAIL_FIRST", "0")):
        _FAILED_SO_FAR[0] += 1
        from agent_sessions.summarizers import SummarizerError

        raise SummarizerError(f"injected outage {_FAILED_SO_FAR[0]}", status_code=503)
    return "FAST SUMMARY"


def _factory(name: str, summarize: Callable[[str], str]) -> Callable[[str], Session]:
    compact = create_compact_function(summarize, protect_head=1, tail_token_budget=40, min_tail_messages=2)

    def build(session_id: str) -> Session:
        return (
            Session.create(config_name=name)
            .for_session(session_id)
            .on_compaction(compact)
            .compact_after(THRESHOLD)
            .on_compaction_error(ERRORS.append)
        )

    return build


registry.register(SLOW, _factory(SLOW, slow_summarize))
registry.register(FAST, _factory(FAST, fast_summarize))
