"""compact_sessions, search_sessions and prune_sessions."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from agent_sessions import Session
from agent_sessions.manager import SessionManager
from agent_sessions.models import CompactionJob, ContextBlockRecord, Message, SessionRecord
from tests import sessions_registry

from .conftest import msg

pytestmark = pytest.mark.django_db

LONG = "The itinerary covers temples, gardens and a tea ceremony in the old town. " * 6


def run(name: str, *args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(name, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def chat(manager: SessionManager, name: str, turns: int = 10) -> str:
    sid = manager.create(name).id
    for i in range(turns):
        manager.append(sid, msg(f"m{i}", "user" if i % 2 == 0 else "assistant", text=f"Turn {i}. {LONG}"))
    return sid


# ── compact_sessions ─────────────────────────────────────────────────────────


def test_compact_inline_with_the_extractive_summariser():
    manager = SessionManager()
    sid = chat(manager, "long")
    out, err = run("compact_sessions", sid, "--protect-head", "1", "--tail-token-budget", "50")
    assert "Compaction: 1 compacted." in out
    assert "100%" in err
    (overlay,) = manager.get_compactions(sid)
    assert overlay.from_message_id == "m1"
    assert overlay.summary.startswith("## Topic")
    history = manager.get_history(sid)
    assert history[1]["id"] == f"compaction_{overlay.id}"
    assert len(history) < 10
    assert CompactionJob.objects.get(session_id=sid).status == "succeeded"  # visible in the admin


def test_compact_short_session_has_nothing_to_do():
    sid = chat(SessionManager(), "short", turns=2)
    out, _ = run("compact_sessions", sid)
    assert "Compaction: 1 nothing to compact." in out


def test_compact_enqueues_a_named_configuration():
    manager = SessionManager()
    sid = chat(manager, "queued")
    out, _ = run("compact_sessions", sid, "--config", sessions_registry.FAST)
    # CELERY_TASK_ALWAYS_EAGER in the tests: the task ran as it was enqueued.
    assert "Compaction: 1 compacted." in out
    assert [c.summary for c in manager.get_compactions(sid)] == ["FAST SUMMARY"]
    assert CompactionJob.objects.get(session_id=sid).config_name == sessions_registry.FAST


def test_compact_sync_reports_failures_and_goes_on():
    manager = SessionManager()
    first, second = chat(manager, "first"), chat(manager, "second")
    sessions_registry.FAILURES.append(RuntimeError("summariser down"))
    try:
        with pytest.raises(CommandError, match="summariser down"):
            run("compact_sessions", first, second, "--config", sessions_registry.FAST, "--sync")
    finally:
        sessions_registry.FAILURES.clear()
    assert len(manager.get_compactions(first)) + len(manager.get_compactions(second)) == 1


def test_compact_all_skips_ended_sessions():
    manager = SessionManager()
    open_id, ended_id = chat(manager, "open"), chat(manager, "ended")
    SessionRecord.objects.filter(id=ended_id).update(end_reason="compaction")
    out, _ = run("compact_sessions", "--all", "--tail-token-budget", "50", "-v", "2")
    assert f"{open_id}\tcompacted" in out
    assert ended_id not in out
    assert manager.get_compactions(ended_id) == []


def test_compact_argument_errors():
    sid = chat(SessionManager(), "x", turns=1)
    with pytest.raises(CommandError, match="or pass --all"):
        run("compact_sessions")
    with pytest.raises(CommandError, match="no such session"):
        run("compact_sessions", "missing")
    with pytest.raises(CommandError, match="no session configuration is registered as 'nope'"):
        run("compact_sessions", sid, "--config", "nope")
    with pytest.raises(CommandError, match="--leaf needs exactly one session id"):
        run("compact_sessions", "--all", "--leaf", "m0")


# ── search_sessions ──────────────────────────────────────────────────────────


@pytest.fixture
def searchable():
    manager = SessionManager()
    one, two = manager.create("one").id, manager.create("two").id
    manager.append(one, msg("q1", text="Where is the Golden Pavilion?"))
    manager.append(one, msg("a1", "assistant", text="Kinkaku-ji, the Golden Pavilion, is in northern Kyoto."))
    manager.append(two, msg("q2", text="Is the pavilion golden all year?"))
    manager.append(two, msg("a2", "assistant", text="Unrelated answer."))
    return one, two


def test_search_prints_session_role_and_snippet(searchable):
    one, two = searchable
    out, _ = run("search_sessions", "golden pavilion")
    rows = [line.split("\t") for line in out.splitlines()]
    assert {(r[0], r[1], r[2]) for r in rows} == {(one, "q1", "user"), (one, "a1", "assistant"), (two, "q2", "user")}
    assert all("olden" in r[3].lower() and "\n" not in r[3] for r in rows)


def test_search_one_session_as_json(searchable):
    one, _ = searchable
    out, _ = run("search_sessions", "golden", "--session", one, "--json", "--limit", "1")
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert row["session_id"] == one
    assert row["id"] in {"q1", "a1"}
    assert set(row) == {"session_id", "id", "role", "snippet"}


def test_search_without_hits(searchable):
    out, err = run("search_sessions", "zeppelin")
    assert out == ""
    assert "No results found." in err
    with pytest.raises(CommandError, match="--limit"):
        run("search_sessions", "golden", "--limit", "0")


# ── prune_sessions ───────────────────────────────────────────────────────────


@pytest.fixture
def aged():
    manager = SessionManager().with_context("memory")
    ids = {name: chat(manager, name, turns=2) for name in ("old-ended", "new-ended", "old-open")}
    manager.get_session(ids["old-ended"]).replace_context_block("memory", "to be pruned")
    old = timezone.now() - timedelta(days=40)
    SessionRecord.objects.filter(id=ids["old-ended"]).update(end_reason="user", updated_at=old)
    SessionRecord.objects.filter(id=ids["new-ended"]).update(end_reason="user")
    SessionRecord.objects.filter(id=ids["old-open"]).update(updated_at=old)
    CompactionJob.objects.create(session_id=ids["old-ended"])
    return ids


def test_prune_dry_run_lists_and_keeps(aged):
    out, _ = run("prune_sessions", "--days", "30", "--dry-run")
    assert aged["old-ended"] in out
    assert aged["new-ended"] not in out
    assert aged["old-open"] not in out
    assert "Would delete 1 session(s)" in out
    assert SessionRecord.objects.filter(id=aged["old-ended"]).exists()


def test_prune_deletes_old_ended_sessions_with_their_rows(aged):
    old = aged["old-ended"]
    out, err = run("prune_sessions", "--days", "30")
    assert "Deleted 1 session(s)." in out
    assert "100%" in err
    assert not SessionRecord.objects.filter(id=old).exists()
    assert not Message.objects.filter(session_id=old).exists()
    assert not ContextBlockRecord.objects.filter(label=f"memory_{old}").exists()
    assert not CompactionJob.objects.filter(session_id=old).exists()
    assert SessionRecord.objects.filter(id__in=[aged["new-ended"], aged["old-open"]]).count() == 2
    assert Session.create().for_session(aged["new-ended"]).get_path_length() == 2


def test_prune_rejects_negative_days(db):
    with pytest.raises(CommandError, match="--days must be zero or more"):
        run("prune_sessions", "--days", "-1")
