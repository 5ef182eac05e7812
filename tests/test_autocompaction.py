"""Auto-compaction: the threshold check, inline and Celery (eager) runs, the job record."""

from __future__ import annotations

import asyncio
import json
import math
from datetime import timedelta

import pytest
from django.db import OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from agent_sessions import (
    Session,
    StaticProvider,
    TokenCounterInput,
    create_compact_function,
    estimate_message_tokens,
    estimate_string_tokens,
)
from agent_sessions import tasks as jobs
from agent_sessions.models import CompactionJob, ContextBlockRecord
from tests import sessions_registry
from tests.conftest import msg, tool_msg
from tests.support.memory_storage import MemoryStorage, chain

pytestmark = pytest.mark.django_db

REFERENCE = dict(protect_head=1, tail_token_budget=10, min_tail_messages=1)


def reference(summarize=lambda prompt: "AUTO SUMMARY", **options):
    return create_compact_function(summarize, **{**REFERENCE, **options})


def job(session_id) -> CompactionJob:
    return CompactionJob.objects.get(session_id=session_id)


@pytest.fixture(autouse=True)
def _reset_registry_state():
    sessions_registry.FAILURES.clear()
    sessions_registry.ERRORS.clear()
    yield
    sessions_registry.FAILURES.clear()


# ── the threshold ───────────────────────────────────────────────────────────


def test_compacts_exactly_when_the_estimate_exceeds_the_threshold(session):
    first_six = [msg(f"m{i}", text=f"message number {i} " * 3) for i in range(6)]
    threshold = estimate_message_tokens(first_six)  # reaching it is not enough: it must be exceeded
    session.on_compaction(reference()).compact_after(threshold)
    for message in first_six:
        session.append_message(message)
    assert session.get_compactions() == []
    assert session.compaction.estimate_tokens() == threshold
    session.append_message(msg("m6", text="one more"))
    [overlay] = session.get_compactions()
    assert (overlay.from_message_id, overlay.summary) == ("m1", "AUTO SUMMARY")
    assert job(session.session_id).status == "succeeded"
    assert len(session.get_history()) == 3


@pytest.mark.parametrize("configure", ["function-only", "threshold-only"])
def test_no_compaction_without_both_a_function_and_a_threshold(session, configure):
    if configure == "function-only":
        session.on_compaction(reference())
    else:
        session.compact_after(1)
    with CaptureQueriesContext(connection) as queries:
        chain(session, 8, words=20)
    assert session.get_compactions() == []
    assert not CompactionJob.objects.exists()
    assert not any("assistant_compactions" in q["sql"] for q in queries.captured_queries)


def test_system_prompt_is_counted_in_the_estimate(session_id):
    soul = "You are a meticulous assistant. " * 40
    session = Session.create().for_session(session_id).with_context("soul", provider=StaticProvider(soul))
    chain(session, 4)
    prompt = session.system_prompt_for_estimate()
    assert soul.strip() in prompt
    history_tokens = estimate_message_tokens(session.get_history())
    assert session.compaction.estimate_tokens() == history_tokens + estimate_string_tokens(prompt)
    # Messages alone stay under the threshold; with the prompt they cross it.
    session.on_compaction(reference()).compact_after(history_tokens + 10)
    session.append_message(msg("m4", text="tiny"))
    assert len(session.get_compactions()) == 1


def test_estimate_does_not_freeze_or_persist_the_prompt(session_id):
    session = (
        Session.create()
        .for_session(session_id)
        .with_context("memory", max_tokens=500)
        .with_cached_prompt()
        .on_compaction(reference())
        .compact_after(10**9)
    )
    key = f"_system_prompt_{session_id}"
    chain(session, 3)
    assert not ContextBlockRecord.objects.filter(label=key).exists()
    frozen = session.freeze_system_prompt()
    session.replace_context_block("memory", "a new fact")
    chain(session, 2, prefix="n")
    assert ContextBlockRecord.objects.get(label=key).content == frozen
    assert session.compaction.estimate_tokens() == (
        estimate_message_tokens(session.get_history()) + estimate_string_tokens(frozen)
    )


def test_reasoning_parts_count_towards_the_threshold(session):
    session.on_compaction(reference()).compact_after(200)
    chain(session, 4)
    assert session.get_compactions() == []
    thinking = {"type": "reasoning", "text": "thinking hard about it " * 60}
    session.append_message({"id": "r", "role": "assistant", "parts": [{"type": "text", "text": "ok"}, thinking]})
    assert len(session.get_compactions()) == 1


# ── custom token counters ───────────────────────────────────────────────────


@pytest.mark.parametrize("answer", [math.nan, math.inf, -math.inf, "100000", None, True, -5])
def test_custom_counter_non_finite_or_non_numeric_counts_as_zero(session, answer):
    session.on_compaction(reference()).compact_after(0, token_counter=lambda data: answer)
    chain(session, 6, words=30)
    assert session.compaction.estimate_tokens() == 0
    assert session.get_compactions() == []


def test_custom_counter_receives_history_prompt_and_blocks(session_id):
    seen: list[TokenCounterInput] = []

    def counter(data):
        seen.append(data)
        return 10.2

    session = (
        Session.create()
        .for_session(session_id)
        .with_context("soul", provider=StaticProvider("Be brief."))
        .on_compaction(reference())
        .compact_after(10, token_counter=counter)
    )
    chain(session, 5)
    assert session.compaction.estimate_tokens() == 11  # rounded up
    whole = [d for d in seen if d.system_prompt]  # the threshold checks (not the per-message boundary walk)
    assert [m["id"] for m in whole[0].messages] == ["m0"]
    assert "Be brief." in whole[0].system_prompt
    assert [b.label for b in whole[0].context_blocks] == ["soul"]
    assert session.get_compactions()  # 11 > 10: compacted


def test_async_counter_is_awaited(session):
    async def counter(data):
        await asyncio.sleep(0)
        return 10_000

    session.on_compaction(reference()).compact_after(100, token_counter=counter)
    chain(session, 4)
    assert session.get_compactions()


def test_tool_heavy_history_is_caught_by_a_counter_that_also_drives_the_boundaries(session):
    calls: list[TokenCounterInput] = []

    def counter(data):
        calls.append(data)
        # A tokenizer that sees what the heuristic under-counts: raw JSON, 1 token per 2 chars.
        return sum(len(json.dumps(m)) // 2 for m in data.messages)

    rows = [{"id": i, "payload": "x" * 20} for i in range(30)]
    messages = [msg("q", text="list the rows")]
    for i in range(3):
        messages.append(tool_msg(f"t{i}", "query", f"c{i}", {"sql": "select *"}, output=rows))
        messages.append(msg(f"a{i}", "assistant", f"found {len(rows)} rows"))
    assert estimate_message_tokens(messages) < 2_000  # the built-in estimate alone would never fire
    session.on_compaction(reference(tail_token_budget=400)).compact_after(2_000, token_counter=counter)
    for message in messages:
        session.append_message(message)
    [overlay] = session.get_compactions()
    # Fired when t2 arrived; t2 alone is over the tail budget by this counter, so only it is protected.
    assert (overlay.from_message_id, overlay.to_message_id) == ("t0", "a1")
    # The same counter drove the threshold (whole history) and the tail walk (one message at a time).
    assert any([m["id"] for m in d.messages] == ["q", "t0", "a0", "t1", "a1", "t2"] for d in calls)
    assert any([m["id"] for m in d.messages] == ["t2"] and d.system_prompt == "" for d in calls)


# ── failures ────────────────────────────────────────────────────────────────


def failing(exc):
    def summarize(prompt):
        raise exc

    return summarize


def test_failure_reaches_the_handler_is_recorded_and_the_message_stays(session):
    errors = []
    session.on_compaction(reference(failing(ValueError("summariser broke")))).compact_after(50)
    session.on_compaction_error(errors.append)
    chain(session, 6, words=10)
    assert session.append_message(msg("last")) is True
    assert session.get_message("last") is not None
    assert errors
    assert isinstance(errors[0], ValueError)
    record = job(session.session_id)
    assert record.status == "failed"
    assert "ValueError: summariser broke" in record.last_error
    assert record.lease_until is None
    assert record.finished_at is not None


def test_a_failing_handler_is_swallowed_and_logged(session, caplog):
    def handler(error):
        raise RuntimeError("handler broke too")

    session.on_compaction(reference(failing(ValueError("nope")))).compact_after(50).on_compaction_error(handler)
    chain(session, 6, words=10)
    assert session.append_message(msg("last")) is True
    assert "on_compaction_error handler failed" in caplog.text
    assert "auto-compaction of session" in caplog.text


def test_async_handler_is_awaited(session):
    errors = []

    async def handler(error):
        errors.append(error)

    session.on_compaction(reference(failing(KeyError("k")))).compact_after(50).on_compaction_error(handler)
    chain(session, 6, words=10)
    assert errors
    assert isinstance(errors[0], KeyError)


def test_database_error_inside_the_callers_transaction_does_not_break_it(session):
    def bad_sql(prompt):
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table_for_compaction")
        return "never"

    errors = []
    session.on_compaction(reference(bad_sql)).compact_after(50).on_compaction_error(errors.append)
    with transaction.atomic():
        chain(session, 6, words=10)
        session.append_message(msg("after"))  # the transaction is still usable
    assert errors
    assert session.get_message("after") is not None
    assert job(session.session_id).status == "failed"


# ── single flight ───────────────────────────────────────────────────────────


def test_a_live_lease_prevents_a_second_run(session):
    session.on_compaction(reference()).compact_after(50)
    token = jobs.acquire_lease(session.session_id)  # another process is compacting
    assert token is not None
    assert jobs.acquire_lease(session.session_id) is None
    chain(session, 6, words=10)
    assert session.get_compactions() == []
    assert job(session.session_id).status == "running"
    assert jobs.release_lease(session.session_id, token, status="idle")
    session.append_message(msg("next"))
    assert len(session.get_compactions()) == 1


def test_an_expired_lease_can_be_taken_over(session):
    token = jobs.acquire_lease(session.session_id)
    CompactionJob.objects.filter(session_id=session.session_id).update(lease_until=timezone.now() - timedelta(1))
    assert jobs.acquire_lease(session.session_id) is not None
    assert not jobs.release_lease(session.session_id, token, status="succeeded")  # no longer ours
    assert job(session.session_id).attempts == 2


def test_custom_storage_compacts_inline_with_a_process_lock():
    errors = []
    session = Session.create(MemoryStorage()).on_compaction(reference()).compact_after(50)
    session.on_compaction_error(errors.append)
    chain(session, 6, words=10)
    assert len(session.get_compactions()) >= 1
    assert errors == []
    lock = jobs._local_lock(session)
    with lock:  # held elsewhere: the next check skips
        before = len(session.get_compactions())
        chain(session, 3, prefix="n", words=30)
        assert len(session.get_compactions()) == before


# ── named configurations (Celery, eager in the test settings) ────────────────


def named(session_id, name=sessions_registry.FAST):
    from agent_sessions import registry

    return registry.get(name).get_session(session_id)


def test_named_session_compacts_through_the_task(session_id):
    session = named(session_id)
    chain(session, 8, words=10)
    [overlay] = session.get_compactions()
    assert overlay.summary == "FAST SUMMARY"
    status = jobs.get_compaction_status(session_id)
    assert (status["status"], status["config_name"], status["attempts"]) == ("succeeded", "tests-fast", 1)
    assert status["last_error"] == ""
    assert status["finished_at"] >= status["started_at"]


def test_running_the_task_twice_is_idempotent(session_id):
    plain = Session.create().for_session(session_id)  # fill the session without triggering anything
    chain(plain, 8, words=10)
    first = jobs.compact_session.apply(args=(sessions_registry.FAST, session_id)).get()
    second = jobs.compact_session.apply(args=(sessions_registry.FAST, session_id)).get()
    assert first["status"] == "succeeded"
    assert second["status"] == "idle"
    assert len(plain.get_compactions()) == 1


def test_task_skips_while_another_run_holds_the_lease(session_id):
    chain(Session.create().for_session(session_id), 8, words=10)
    jobs.acquire_lease(session_id)
    result = jobs.compact_session.apply(args=(sessions_registry.FAST, session_id)).get()
    assert result == {"status": "busy"}
    assert Session.create().for_session(session_id).get_compactions() == []


def test_transient_errors_are_retried(session_id):
    sessions_registry.FAILURES.extend([OperationalError("database went away"), OperationalError("again")])
    session = named(session_id)
    chain(session, 8, words=10)
    assert len(session.get_compactions()) == 1
    record = job(session_id)
    assert (record.status, record.attempts) == ("succeeded", 3)
    assert sessions_registry.ERRORS == []


def over_threshold_then_trigger(session_id):
    """Fill a session without triggering anything, then append once through the named configuration."""
    chain(Session.create().for_session(session_id), 8, words=10)
    session = named(session_id)
    assert session.append_message(msg("trigger")) is True
    return session


@override_settings(AGENT_SESSIONS_COMPACTION_MAX_RETRIES=1)
def test_exhausted_retries_are_recorded_and_reported(session_id):
    sessions_registry.FAILURES.extend([OperationalError("down")] * 2)
    session = over_threshold_then_trigger(session_id)
    assert session.get_message("trigger") is not None
    assert session.get_compactions() == []
    record = job(session_id)
    assert (record.status, record.attempts) == ("failed", 2)
    assert "OperationalError: down" in record.last_error
    assert [type(e) for e in sessions_registry.ERRORS] == [OperationalError]


def test_permanent_errors_are_not_retried(session_id):
    sessions_registry.FAILURES.append(ValueError("bad prompt"))
    over_threshold_then_trigger(session_id)
    record = job(session_id)
    assert (record.status, record.attempts) == ("failed", 1)
    assert isinstance(sessions_registry.ERRORS[0], ValueError)


def test_transient_classification():
    from agent_sessions.summarizers import SummarizerError

    assert jobs.is_transient(SummarizerError("unreachable"))
    assert jobs.is_transient(SummarizerError("busy", status_code=503))
    assert jobs.is_transient(SummarizerError("slow down", status_code=429))
    assert not jobs.is_transient(SummarizerError("bad key", status_code=401))
    assert not jobs.is_transient(ValueError("x"))


def test_unknown_configuration_is_recorded_as_failed(session_id):
    result = jobs.compact_session.apply(args=("no-such-config", session_id)).get()
    assert result["status"] == "failed"
    assert "no-such-config" in job(session_id).last_error


def test_enqueue_failure_keeps_the_job_pending_and_the_sweeper_retries(session_id, monkeypatch):
    def broker_down(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(jobs.compact_session, "apply_async", broker_down)
    session = named(session_id)
    chain(session, 8, words=10)
    assert session.get_message("m7") is not None
    assert session.get_compactions() == []
    record = job(session_id)
    assert record.status == "pending"
    assert "enqueue failed: ConnectionError" in record.last_error
    assert any(isinstance(e, ConnectionError) for e in sessions_registry.ERRORS)
    assert record.enqueued_at is None  # nothing reached the broker
    monkeypatch.undo()
    assert jobs.sweep_pending_compactions() == 1  # never published: re-sent at once, no grace period
    assert len(session.get_compactions()) == 1
    assert job(session_id).status == "succeeded"


def test_sweeper_fails_expired_inline_runs(session_id):
    jobs.acquire_lease(session_id)
    CompactionJob.objects.filter(session_id=session_id).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert jobs.sweep_pending_compactions() == 0
    assert job(session_id).status == "failed"


def test_enqueue_compaction_compacts_now_and_reports_status(session_id):
    plain = Session.create().for_session(session_id)
    chain(plain, 7)  # under the threshold: a manual request compacts anyway
    assert named(session_id).compaction.estimate_tokens() < sessions_registry.THRESHOLD
    record = jobs.enqueue_compaction(sessions_registry.FAST, session_id)
    assert isinstance(record, CompactionJob)
    assert record.status == "succeeded"
    assert len(plain.get_compactions()) == 1
    status = jobs.get_compaction_status(session_id)
    assert set(status) == {
        "session_id",
        "config_name",
        "status",
        "attempts",
        "last_error",
        "requested_at",
        "started_at",
        "finished_at",
        "lease_until",
        "holder",
        "heartbeat_at",
        "enqueued_at",
        "updated_at",
    }
    assert record.outcome == "published"
    assert status["holder"] == ""
    assert jobs.enqueue_compaction(sessions_registry.FAST, session_id, force=False).status == "idle"


def test_a_request_joins_a_queued_one(session_id, monkeypatch):
    sent = []
    monkeypatch.setattr(jobs.compact_session, "apply_async", lambda *a, **k: sent.append(a))
    jobs.enqueue_compaction(sessions_registry.FAST, session_id)
    jobs.enqueue_compaction(sessions_registry.FAST, session_id)
    assert len(sent) == 1
    assert job(session_id).status == "pending"


def test_status_of_an_unknown_session_is_idle():
    assert jobs.get_compaction_status("never-seen")["status"] == "idle"


# ── the O(1) estimate ───────────────────────────────────────────────────────


def full(session, leaf=None):
    return estimate_message_tokens(session.get_history(leaf))


def fast(session, leaf=None):
    return session.storage.visible_history_tokens(leaf)


def test_fast_estimate_matches_the_history_in_tree_shapes(session):
    chain(session, 30, words=7)  # m0..m29
    assert fast(session) == full(session)
    session.add_compaction("first summary " * 3, "m3", "m10")
    assert fast(session) == full(session)
    session.add_compaction("extended summary " * 5, "m3", "m20")  # iterative: same start, longer
    assert fast(session) == full(session)
    chain(session, 4, prefix="b", parent="m15")  # a branch inside the newest overlay's range
    assert fast(session, "b3") == full(session, "b3")
    chain(session, 4, prefix="c", parent="m25")  # a branch after it
    assert fast(session, "c3") == full(session, "c3")
    session.add_compaction("branch summary", "c0", "c2")  # sibling overlay: invisible on the main path
    assert fast(session, "m29") == full(session, "m29")
    assert fast(session, "c3") == full(session, "c3")
    session.add_compaction("late", "m23", "m26")  # a second, disjoint overlay on the main path
    assert fast(session, "m29") == full(session, "m29")
    assert fast(session, "m26") == full(session, "m26")  # the leaf itself ends an overlay


def test_fast_estimate_falls_back_when_overlays_overlap_irregularly(session):
    chain(session, 12)
    session.add_compaction("long", "m2", "m9")
    session.add_compaction("newer but shorter", "m2", "m5")  # the longer one still wins on read
    assert fast(session) == full(session)
    session.add_compaction("crossing", "m1", "m4")  # starts earlier, ends inside: only the full read resolves it
    assert fast(session) is None
    assert session.compaction.estimate_tokens() == full(session)


def test_rows_without_totals_fall_back_to_the_history(session):
    chain(session, 6)
    session.add_compaction("s", "m1", "m3")
    with connection.cursor() as cursor:  # as a foreign writer leaves them
        cursor.execute(
            "UPDATE assistant_messages SET path_tokens = NULL, depth = NULL WHERE session_id = %s", [session.session_id]
        )
    assert fast(session) is None
    assert session.compaction.estimate_tokens() == full(session)


def test_threshold_check_queries_do_not_grow_with_history(session_id):
    def appends_queries(n):
        sid = f"{session_id}-{n}"
        session = Session.create().for_session(sid).on_compaction(reference()).compact_after(10**12)
        session.storage.append_messages_bulk([msg(f"m{i}") for i in range(n)])
        session.add_compaction("summary", "m1", f"m{n - 3}")
        with CaptureQueriesContext(connection) as queries:
            session.append_message(msg("new"))
        return len(queries.captured_queries)

    assert appends_queries(10) == appends_queries(400)


# ── the incremental check ───────────────────────────────────────────────────


class RecordingRunner:
    """A CompactionRunner that only records what it was asked to do."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def lease(self, session):
        return jobs.manual_lease(session)

    def auto_compact(self, session, leaf_id):
        self.calls.append(leaf_id)


def _recorded(session_id: str, threshold: int) -> tuple[Session, RecordingRunner]:
    runner = RecordingRunner()
    session = Session(Session.create().storage, runner=runner).for_session(session_id)
    return session.on_compaction(reference()).compact_after(threshold), runner


def test_an_append_under_the_last_estimate_adds_its_tokens_without_a_query():
    plain = Session.create().for_session("incremental-plain")
    session, runner = _recorded("incremental", threshold=10**9)
    session.append_message(msg("m0", text="first"))  # a full estimate, remembered
    plain.append_message(msg("p0", text="first"))  # a first append also makes the registry row: compare later ones
    for target in (plain, session):
        with CaptureQueriesContext(connection) as queries:
            target.append_message(msg("m1" if target is session else "p1", text="second message"))
        target.queries = len(queries)
    assert session.queries == plain.queries  # the check itself read nothing
    assert session.compaction.estimate_tokens() == session.compaction._last.tokens  # and agrees with a full read
    assert runner.calls == []


def test_an_estimate_over_the_threshold_is_read_again_before_the_runner_is_called():
    session, runner = _recorded("stale-high", threshold=60)
    for i in range(3):
        session.append_message(msg(f"m{i}", text=f"message number {i} " * 3))
    # Another process compacts most of the path: this session's remembered estimate is now too high.
    other = Session.create().for_session("stale-high")
    other.add_compaction("short", "m0", "m2")
    session.append_message(msg("m3", text="a few more words " * 2))
    assert session.compaction.estimate_tokens() <= 60
    assert runner.calls == []  # the full re-read saw the overlay: nothing was dispatched
    session.append_message(msg("m4", text="and then a great many more words " * 6))
    assert runner.calls == ["m4"]


def test_context_writes_and_the_refresh_interval_force_a_full_estimate(settings):
    session, _ = _recorded("refresh", threshold=10**9)
    session.with_context("memory")
    session.append_message(msg("m0", text="hello"))
    session.append_message(msg("m1", text="hello again"))
    assert session.compaction._last.read_at is not None
    read_at = session.compaction._last.read_at
    session.replace_context_block("memory", "a fact " * 50)  # the prompt estimate grows
    session.append_message(msg("m2", text="and again"))
    assert session.compaction._last.read_at > read_at
    assert session.compaction._last.tokens == session.compaction.estimate_tokens()
    settings.AGENT_SESSIONS_COMPACTION_CHECK_REFRESH_SECONDS = 0
    read_at = session.compaction._last.read_at
    session.append_message(msg("m3", text="once more"))
    assert session.compaction._last.read_at > read_at
