"""The app's system checks: each fires in its bad configuration, with its id and hint, and stays quiet otherwise."""

from __future__ import annotations

import io

import pytest
from django.core import checks as django_checks
from django.core.management import call_command
from django.test import override_settings

from agent_sessions import checks
from tests import sessions_registry  # noqa: F401  (registers named configurations)

# The suite's session teardown needs the test database (see tests/conftest.py).
pytestmark = pytest.mark.django_db

SQLITE = {"default": "django.db.backends.sqlite3"}
POSTGRES = {"default": "django.db.backends.postgresql"}


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_checks_are_registered():
    registered = set(django_checks.registry.registry.get_checks())
    for fn in (
        checks.check_sqlite_fts5,
        checks.check_celery_production,
        checks.check_pgtrigger_installed,
        checks.check_summarizer_api_key,
    ):
        assert fn in registered


def test_manage_py_check_reports_our_ids():
    out, err = io.StringIO(), io.StringIO()
    with override_settings(DEBUG=False, CELERY_TASK_ALWAYS_EAGER=True):
        call_command("check", stdout=out, stderr=err)
    assert "agent_sessions.W010" in err.getvalue()


# ── E010: SQLite without FTS5 ────────────────────────────────────────────────


def test_fts5_probe_matches_this_python():
    assert checks.sqlite_has_fts5() is True  # the test environment's SQLite has FTS5


def test_sqlite_without_fts5_is_an_error(monkeypatch):
    monkeypatch.setattr(checks, "database_engines", lambda: SQLITE)
    monkeypatch.setattr(checks, "sqlite_has_fts5", lambda: False)
    (error,) = checks.check_sqlite_fts5()
    assert error.id == "agent_sessions.E010"
    assert error.level == django_checks.ERROR
    assert "default" in error.msg
    assert "FTS5" in error.hint


def test_fts5_check_is_quiet_with_fts5_or_without_sqlite(monkeypatch):
    monkeypatch.setattr(checks, "database_engines", lambda: SQLITE)
    assert checks.check_sqlite_fts5() == []
    monkeypatch.setattr(checks, "sqlite_has_fts5", lambda: False)
    monkeypatch.setattr(checks, "database_engines", lambda: POSTGRES)
    assert checks.check_sqlite_fts5() == []


# ── W010 / W011: Celery in production ────────────────────────────────────────


@override_settings(DEBUG=False, CELERY_TASK_ALWAYS_EAGER=True, CELERY_BROKER_URL="memory://")
def test_eager_celery_with_debug_off():
    (warning,) = checks.check_celery_production()
    assert warning.id == "agent_sessions.W010"
    assert "CELERY_BROKER_URL" in warning.hint


@override_settings(DEBUG=False, CELERY_TASK_ALWAYS_EAGER=False, CELERY_BROKER_URL="memory://")
def test_memory_broker_with_debug_off():
    (warning,) = checks.check_celery_production()
    assert warning.id == "agent_sessions.W011"
    assert "worker" in warning.hint


@pytest.mark.parametrize(
    "overrides",
    [
        {"DEBUG": True, "CELERY_TASK_ALWAYS_EAGER": True},  # development
        {"DEBUG": False, "CELERY_TASK_ALWAYS_EAGER": False, "CELERY_BROKER_URL": "redis://redis:6379/0"},
    ],
)
def test_celery_check_is_quiet_when_fine(overrides):
    with override_settings(**overrides):
        assert checks.check_celery_production() == []


@override_settings(DEBUG=False, CELERY_TASK_ALWAYS_EAGER=True)
def test_celery_check_needs_a_named_configuration(monkeypatch):
    monkeypatch.setattr(checks, "_auto_compaction_configured", lambda: False)
    assert checks.check_celery_production() == []


# ── W012: pgtrigger ──────────────────────────────────────────────────────────


def test_pgtrigger_missing_on_postgres(monkeypatch):
    from django.apps import apps

    real = apps.is_installed
    monkeypatch.setattr(checks, "database_engines", lambda: POSTGRES)
    monkeypatch.setattr(apps, "is_installed", lambda name: False if name == "pgtrigger" else real(name))
    (warning,) = checks.check_pgtrigger_installed()
    assert warning.id == "agent_sessions.W012"
    assert '"pgtrigger"' in warning.hint
    monkeypatch.setattr(checks, "database_engines", lambda: SQLITE)
    assert checks.check_pgtrigger_installed() == []


def test_pgtrigger_installed(monkeypatch):
    monkeypatch.setattr(checks, "database_engines", lambda: POSTGRES)
    assert checks.check_pgtrigger_installed() == []


# ── W013: summariser API key ─────────────────────────────────────────────────


@override_settings(AGENT_SESSIONS_SUMMARIZER_MODEL="gpt-4o", AGENT_SESSIONS_SUMMARIZER_API_KEY=None)
def test_summarizer_without_key():
    (warning,) = checks.check_summarizer_api_key()
    assert warning.id == "agent_sessions.W013"
    assert "api.openai.com" in warning.msg
    assert "AGENT_SESSIONS_SUMMARIZER_API_KEY" in warning.hint


@pytest.mark.parametrize(
    "overrides",
    [
        {},  # nothing configured: the extractive summariser is used
        {"AGENT_SESSIONS_SUMMARIZER_MODEL": "gpt-4o", "AGENT_SESSIONS_SUMMARIZER_API_KEY": "sk-test"},
        {"AGENT_SESSIONS_SUMMARIZER_BASE_URL": "http://localhost:11434/v1"},  # a local Ollama
        {"AGENT_SESSIONS_SUMMARIZER_BASE_URL": "http://127.0.0.1:8001/v1", "AGENT_SESSIONS_SUMMARIZER_MODEL": "x"},
    ],
)
def test_summarizer_check_is_quiet_when_fine(overrides):
    with override_settings(**overrides):
        assert checks.check_summarizer_api_key() == []


# ── W014: SQLite transaction mode ────────────────────────────────────────────


def test_sqlite_without_immediate_transactions_warns(monkeypatch):
    monkeypatch.setattr(
        checks,
        "database_settings",
        lambda: {
            "default": {"ENGINE": "django.db.backends.sqlite3", "OPTIONS": {"transaction_mode": "IMMEDIATE"}},
            "deferred": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:", "OPTIONS": {}},
        },
    )
    (warning,) = checks.check_sqlite_transaction_mode()
    assert warning.id == "agent_sessions.W014"
    assert "deferred" in warning.msg
    assert "IMMEDIATE" in warning.hint


def test_sqlite_transaction_mode_check_quiet_when_immediate_or_postgres(monkeypatch):
    monkeypatch.setattr(
        checks,
        "database_settings",
        lambda: {
            "a": {"ENGINE": "django.db.backends.sqlite3", "OPTIONS": {"transaction_mode": "immediate"}},
            "b": {"ENGINE": "django.db.backends.postgresql", "NAME": "x"},
        },
    )
    assert checks.check_sqlite_transaction_mode() == []
