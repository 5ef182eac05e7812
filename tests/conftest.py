"""Shared fixtures: fresh sessions, message builders, and the database switch."""

from __future__ import annotations

import os
import uuid

import pytest
from django.conf import settings

# The JSON API fixtures (users, Bearer clients, test configurations) are visible to every test module.
pytest_plugins = ["tests.support.api"]


def pytest_report_header(config):
    partitions = f", {settings.TEST_PARTITIONS} hash partitions" if settings.TEST_PARTITIONS else ""
    return f"agent_sessions test database: {settings.DB} ({settings.DATABASES['default']['NAME']}{partitions})"


# Tests for one database carry a marker; they run in that database's run of `make test`.  Modules that
# touch no database (``no_database``) run once, in the SQLite run: three runs of them would test the same.
DATABASE_MARKERS = {"postgres_only": "postgres", "sqlite_only": "sqlite", "no_database": "sqlite"}
_DATABASE_FIXTURES = {"db", "transactional_db", "_django_db_helper", "live_server"}


def _uses_a_database(item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(
        _DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("no_database") and _uses_a_database(item):
            raise pytest.UsageError(f"{item.nodeid} is marked no_database but uses the database")
        for marker, database in DATABASE_MARKERS.items():
            if item.get_closest_marker(marker) and database != settings.DB:
                scope = "touches no database" if marker == "no_database" else f"{database} only"
                item.add_marker(pytest.mark.skip(reason=f"{scope}: runs in the {database} run"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI a skip is a failure, unless the test belongs to the other database's run:
    a missing tool or service must be installed by .ci/run, not silently passed over."""
    outcome = yield
    report = outcome.get_result()
    if not os.environ.get("CI") or not report.skipped or hasattr(report, "wasxfail"):
        return
    if any(item.get_closest_marker(marker) for marker in DATABASE_MARKERS):
        return
    reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
    report.outcome = "failed"
    report.longrepr = f"skipped under CI (install what it needs in .ci/run, or mark it for one database): {reason}"


def msg(id: str, role: str = "user", text: str | None = None, **extra) -> dict:
    """A UIMessage with one text part."""
    message = {"id": id, "role": role, "parts": [{"type": "text", "text": f"{id} text" if text is None else text}]}
    message.update(extra)
    return message


def tool_msg(id: str, name: str, call_id: str, input: dict, output=None, role: str = "assistant") -> dict:
    """An assistant message carrying one tool call (and its output when given)."""
    part = {"type": f"tool-{name}", "toolCallId": call_id, "input": input, "state": "input-available"}
    if output is not None:
        part.update(state="output-available", output=output)
    return {"id": id, "role": role, "parts": [part]}


@pytest.fixture
def session_id() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def session(session_id, db):
    from agent_sessions import Session

    return Session.create().for_session(session_id)


@pytest.fixture
def build():
    """``build(session, ["a", "b", ("c", "a")])``: append ids, optionally with explicit parents."""

    def _build(session, spec):
        for item in spec:
            if isinstance(item, tuple):
                mid, parent = item
                session.append_message(msg(mid), parent)
            else:
                session.append_message(msg(item))
        return session

    return _build


@pytest.fixture
def is_postgres() -> bool:
    return settings.DB == "postgres"


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database, hash-partitioned right after migrations when TEST_PARTITIONS is set."""
    if settings.TEST_PARTITIONS:
        from django.core.management import call_command

        with django_db_blocker.unblock():
            # No ANALYZE: the statistics stay as fresh-from-migrate as in the unpartitioned run.
            call_command(
                "partition_tables", partitions=settings.TEST_PARTITIONS, no_analyze=True, no_progress=True, verbosity=0
            )
    return


@pytest.fixture(autouse=True)
def _forget_window_hints():
    """Each test starts without the recent-window sizes an earlier one left in this process, so
    the statements it counts do not depend on which tests ran before it."""
    from agent_sessions.storage.range_reads import WINDOW_HINTS

    WINDOW_HINTS.clear()


@pytest.fixture(scope="session", autouse=True)
def _reap_stray_connections(django_db_setup, django_db_blocker):
    """Close connections other threads opened (async twins, worker threads) so the
    Postgres test database can be dropped at the end."""
    yield
    from django.db import connection

    from agent_sessions import dbthreads

    dbthreads.shutdown()  # the async twins' threads close their own connections
    if connection.vendor != "postgresql" or not str(connection.settings_dict["NAME"]).startswith("test_"):
        return  # SQLite, or no test database was created in this run
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
