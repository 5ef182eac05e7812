"""The system check for trigram (CJK) search support: silent when ready, clear hints when not."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from agent_sessions import checks

pytestmark = pytest.mark.django_db


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_ready_database_passes():
    assert checks.check_search_trigram(databases=["default"]) == []
    call_command("check", databases=["default"], verbosity=0)


def test_only_runs_with_databases():
    assert checks.check_search_trigram(databases=None) == []


@pytest.mark.sqlite_only
def test_sqlite_without_trigram_tokenizer(monkeypatch):
    monkeypatch.setattr(checks, "sqlite_has_trigram", lambda: False)
    (error,) = checks.check_search_trigram(databases=["default"])
    assert error.id == "agent_sessions.E020"
    assert "3.34" in error.hint


def test_sqlite_probe_reports_support():
    assert checks.sqlite_has_trigram() in (True, None)


@pytest.mark.postgres_only
@pytest.mark.parametrize(
    ("state", "expected"), [((False, False, True), "E021"), ((False, True, False), "E022"), ((False, True, True), None)]
)
def test_postgres_pg_trgm_states(monkeypatch, state, expected):
    monkeypatch.setattr(checks, "_pg_trgm_state", lambda alias: state)
    result = checks.check_search_trigram(databases=["default"])
    assert ids(result) == ([f"agent_sessions.{expected}"] if expected else [])
    if expected:
        assert "pg_trgm" in result[0].msg
        assert result[0].hint


@pytest.mark.postgres_only
def test_postgres_state_is_read_from_the_server():
    assert checks._pg_trgm_state("default") == (True, True, True)


@pytest.mark.postgres_only
def test_postgres_without_the_session_search_index_warns():
    """As migrate leaves it without btree_gin: the words-only index, no (session_id, content_tsv) one."""
    from django.db import connection

    assert checks.check_search_session_index(databases=["default"]) == []
    with connection.cursor() as cursor:  # inside the test's transaction: rolled back afterwards
        cursor.execute("CREATE INDEX idx_assistant_msg_fts ON assistant_messages USING GIN (content_tsv)")
        cursor.execute("DROP INDEX idx_assistant_msg_session_fts")
    (warning,) = checks.check_search_session_index(databases=["default"])
    assert warning.id == "agent_sessions.W015"
    assert "btree_gin" in warning.msg
    assert "CREATE EXTENSION IF NOT EXISTS btree_gin" in warning.hint
    assert "USING GIN (session_id, content_tsv)" in warning.hint


def test_session_search_index_check_is_silent_off_postgres_or_without_databases():
    assert checks.check_search_session_index(databases=None) == []
    assert checks.check_search_session_index(databases=["default"]) == []
