"""Django system checks for agent_sessions."""

from __future__ import annotations

from django.core import checks
from django.db import connections

SUPPORTED_VENDORS = {"sqlite", "postgresql"}


@checks.register(checks.Tags.database)
def check_database_vendor(app_configs=None, databases=None, **kwargs):
    """Only SQLite and Postgres have the full-text search this app relies on."""
    errors = []
    for alias in databases or []:
        vendor = connections[alias].vendor
        if vendor not in SUPPORTED_VENDORS:
            errors.append(
                checks.Warning(
                    f"agent_sessions supports SQLite and PostgreSQL; database '{alias}' is {vendor}.",
                    hint="Route agent_sessions models to a SQLite or PostgreSQL database.",
                    id="agent_sessions.W001",
                )
            )
    return errors


# ── operator checks (W010+/E010+) ────────────────────────────────────────────

_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}


def database_settings() -> dict[str, dict]:
    """``settings.DATABASES`` (read from settings: no connection is opened)."""
    from django.conf import settings

    return settings.DATABASES


def database_engines() -> dict[str, str]:
    """``{alias: ENGINE}`` of the configured databases."""
    return {alias: str(db.get("ENGINE", "")) for alias, db in database_settings().items()}


def sqlite_has_fts5() -> bool:
    """Whether the SQLite library Python links against was built with FTS5."""
    from .storage import sqlite

    return sqlite.has_fts5()


@checks.register()
def check_sqlite_fts5(app_configs=None, **kwargs):
    """Message search on SQLite is an FTS5 table; its migration fails without FTS5."""
    aliases = [alias for alias, engine in database_engines().items() if engine.endswith("sqlite3")]
    if not aliases or sqlite_has_fts5():
        return []
    return [
        checks.Error(
            f"SQLite (databases: {', '.join(aliases)}) was built without FTS5; agent_sessions needs it for search.",
            hint="Use a Python/SQLite build with FTS5 (python.org and Debian builds have it; "
            "`pip install pysqlite3-binary` is another), or use PostgreSQL (DATABASE_URL=postgres://...).",
            id="agent_sessions.E010",
        )
    ]


@checks.register(checks.Tags.database)
def check_sqlite_transaction_mode(app_configs=None, **kwargs):
    """Concurrent writers on SQLite need ``BEGIN IMMEDIATE``: a deferred transaction that read
    first fails at once with "database is locked" when it tries to write."""
    aliases = [
        alias
        for alias, db in database_settings().items()
        if str(db.get("ENGINE", "")).endswith("sqlite3")
        and str((db.get("OPTIONS") or {}).get("transaction_mode", "")).upper() != "IMMEDIATE"
    ]
    if not aliases:
        return []
    return [
        checks.Warning(
            f"SQLite databases {', '.join(aliases)} use deferred transactions; concurrent writers "
            "(web workers, Celery) can fail at once with 'database is locked'.",
            hint='Set DATABASES[...]["OPTIONS"]["transaction_mode"] = "IMMEDIATE" (and, for speed, '
            '"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;").',
            id="agent_sessions.W014",
        )
    ]


def _auto_compaction_configured() -> bool:
    """Named configurations exist (or are imported for the worker): compaction goes through Celery."""
    from . import conf, registry

    return bool(registry.names() or conf.config_modules())


@checks.register(checks.Tags.compatibility)
def check_celery_production(app_configs=None, **kwargs):
    """With DEBUG off, auto-compaction should run on a worker, not inline or into a per-process broker."""
    from django.conf import settings

    if settings.DEBUG or not _auto_compaction_configured():
        return []
    broker = str(getattr(settings, "CELERY_BROKER_URL", "") or "")
    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        return [
            checks.Warning(
                "CELERY_TASK_ALWAYS_EAGER is on with DEBUG off: auto-compaction (an LLM call) runs inside "
                "the request that appended the message.",
                hint="Set CELERY_BROKER_URL (e.g. redis://redis:6379/0) and run a worker: "
                "`celery -A project worker`; the demo settings turn eager mode off when a broker is set.",
                id="agent_sessions.W010",
            )
        ]
    if broker.startswith("memory://"):
        return [
            checks.Warning(
                "CELERY_BROKER_URL is memory:// with DEBUG off: compaction tasks never leave this process, "
                "so no worker runs them.",
                hint="Point CELERY_BROKER_URL at Redis or RabbitMQ and run `celery -A project worker`.",
                id="agent_sessions.W011",
            )
        ]
    return []


@checks.register()
def check_pgtrigger_installed(app_configs=None, **kwargs):
    """On PostgreSQL the app's triggers are django-pgtrigger triggers; pgtrigger's tools need its app."""
    from django.apps import apps

    uses_postgres = any("postgresql" in engine for engine in database_engines().values())
    if not uses_postgres or apps.is_installed("pgtrigger"):
        return []
    return [
        checks.Warning(
            "'pgtrigger' is not in INSTALLED_APPS: agent_sessions' Postgres triggers (session-delete cascade, "
            "message-tree guard) are installed by its migrations, but `manage.py pgtrigger` and pgtrigger's "
            "schema editor (which keeps triggers across column changes) do not see them.",
            hint='Add "pgtrigger" to INSTALLED_APPS, before "agent_sessions".',
            id="agent_sessions.W012",
        )
    ]


DOCS_APPS = ("ninja", "django.contrib.staticfiles")


def api_docs_mounted() -> bool:
    """Whether the project's URLconf mounts the JSON API's docs page (``include("agent_sessions.urls")``)."""
    from django.urls import NoReverseMatch, reverse

    try:
        reverse("agent_sessions_api:openapi-view")
    except NoReverseMatch:
        return False
    return True


@checks.register()
def check_api_docs_offline(app_configs=None, **kwargs):
    """``/api/docs`` loads Swagger UI from django-ninja's static files only when ``ninja`` is an installed app
    (and static files are served); otherwise ninja renders a page that loads it from a CDN, blank offline."""
    from django.apps import apps

    missing = [app for app in DOCS_APPS if not apps.is_installed(app)]
    if not missing or not api_docs_mounted():
        return []
    listed = ", ".join(f'"{app}"' for app in missing)
    return [
        checks.Warning(
            f"{listed} not in INSTALLED_APPS: the API docs page loads Swagger UI from a CDN "
            "(a blank page offline or behind a strict Content-Security-Policy).",
            hint=f"Add {listed} to INSTALLED_APPS; Swagger UI is then served from the static files "
            "(collectstatic in production).",
            id="agent_sessions.W016",
        )
    ]


@checks.register()
def check_summarizer_api_key(app_configs=None, **kwargs):
    """An OpenAI-compatible summariser configured for a remote endpoint without an API key."""
    from urllib.parse import urlsplit

    from django.conf import settings

    from . import conf

    configured = any(getattr(settings, f"AGENT_SESSIONS_SUMMARIZER_{key}", None) for key in ("BASE_URL", "MODEL"))
    if not configured or conf.summarizer_api_key():
        return []
    host = (urlsplit(conf.summarizer_base_url()).hostname or "").lower()
    if host in _LOOPBACK_HOSTS or host.startswith("127."):
        return []  # a local server (Ollama, vLLM) usually needs no key
    return [
        checks.Warning(
            f"AGENT_SESSIONS_SUMMARIZER_API_KEY is not set, but an OpenAI-compatible summariser is configured "
            f"for {conf.summarizer_base_url()}: requests will fail with 401, and the API's default "
            "configuration falls back to the offline extractive summariser.",
            hint="Set AGENT_SESSIONS_SUMMARIZER_API_KEY (e.g. from an environment variable) in settings.",
            id="agent_sessions.W013",
        )
    ]


# ── substring (CJK) search: trigram indexes (E020+) ─────────────────────────


def sqlite_has_trigram() -> bool | None:
    """Whether SQLite's FTS5 has the ``trigram`` tokenizer (3.34+); None without FTS5 (see E010)."""
    if not sqlite_has_fts5():
        return None
    from .storage import sqlite

    return sqlite.has_trigram()


def _pg_trgm_state(alias: str) -> tuple[bool, bool, bool]:
    """``(installed, available, creatable)`` for pg_trgm on a Postgres alias."""
    from .storage import postgres

    return postgres.pg_trgm_state(alias)


@checks.register(checks.Tags.database)
def check_search_trigram(app_configs=None, databases=None, **kwargs):
    """CJK search needs a trigram index: FTS5's ``trigram`` tokenizer, or Postgres' pg_trgm."""
    from django.db import DatabaseError

    from .storage.postgres import PG_TRGM_INSTALL

    errors = []
    for alias in databases or []:
        vendor = connections[alias].vendor
        if vendor == "sqlite" and sqlite_has_trigram() is False:
            errors.append(
                checks.Error(
                    f"SQLite of database '{alias}' has FTS5 without the 'trigram' tokenizer (SQLite < 3.34); "
                    "migrate (substring search for Japanese/CJK text) cannot create its index.",
                    hint="Use SQLite 3.34 or newer (Python 3.11 from python.org, Debian 12, or "
                    "`pip install pysqlite3-binary`), or use PostgreSQL.",
                    id="agent_sessions.E020",
                )
            )
        elif vendor == "postgresql":
            try:
                installed, available, creatable = _pg_trgm_state(alias)
            except DatabaseError:
                continue  # the database is unreachable: other checks and migrate will say so
            if installed:
                continue
            if not available:
                errors.append(
                    checks.Error(
                        f"PostgreSQL database '{alias}' has no pg_trgm extension available; migrate "
                        "(substring search for Japanese/CJK text) needs it.",
                        hint="Install the server's contrib package (Debian/Ubuntu: postgresql-contrib; "
                        "the official Docker images include it).",
                        id="agent_sessions.E021",
                    )
                )
            elif not creatable:
                errors.append(
                    checks.Error(
                        f"PostgreSQL database '{alias}': the current user may not create the pg_trgm extension "
                        "that migrate needs.",
                        hint=f"Have an administrator run `{PG_TRGM_INSTALL};` in that "
                        "database once, or grant CREATE on it to this user.",
                        id="agent_sessions.E022",
                    )
                )
    return errors


@checks.register(checks.Tags.database)
def check_search_session_index(app_configs=None, databases=None, **kwargs):
    """Per-session search stays flat at scale only with the btree_gin index, which ``migrate`` skips
    (keeping the slower words-only index) where btree_gin cannot be created."""
    from django.db import DatabaseError

    from .storage.postgres import SESSION_FTS_INSTALL, session_fts_missing

    warnings = []
    for alias in databases or []:
        if connections[alias].vendor != "postgresql":
            continue
        try:
            missing = session_fts_missing(alias)
        except DatabaseError:
            continue  # unreachable: other checks and migrate say so
        if missing:
            warnings.append(
                checks.Warning(
                    f"PostgreSQL database '{alias}' has no (session_id, content_tsv) search index: btree_gin "
                    "was not available when the migrations ran. Search stays correct, but a session's search "
                    "reads every posting of a common word across all sessions, so it slows as the table grows.",
                    hint="Install the server's contrib package, then as a user allowed to create extensions run: "
                    + "; ".join(SESSION_FTS_INSTALL)
                    + ";",
                    id="agent_sessions.W015",
                )
            )
    return warnings


AMBIGUOUS_SHOWN = 20


@checks.register(checks.Tags.database)
def check_ambiguous_owners(app_configs=None, databases=None, **kwargs):
    """Context blocks and search entries whose key ends with ``_<id>`` of several registered sessions
    (``memory_user_X`` with sessions ``X`` and ``user_X``): the upgrade gave them the longest id."""
    from django.db import DatabaseError

    from .storage import owners

    warnings = []
    for alias in databases or []:
        try:
            found = owners.ambiguous_rows(alias, limit=AMBIGUOUS_SHOWN)
        except DatabaseError:  # not migrated yet
            continue
        if not found:
            continue
        listed = "; ".join(
            f"{table}.{label} → {owner or 'no owner'} (also {', '.join(others)})"
            for table, label, owner, others in found
        )
        warnings.append(
            checks.Warning(
                f"Database '{alias}': {len(found)}{'+' if len(found) >= AMBIGUOUS_SHOWN else ''} context "
                f"block/search entry row(s) could belong to several sessions: {listed}.",
                hint="Each was given the session with the longest id it ends with; if another session owns it, "
                "set its session_id column to that session's id (see docs/data-model.md, 'Ownership').",
                id="agent_sessions.W030",
            )
        )
    return warnings


def squashed_migrations() -> list[tuple[str, list[tuple[str, str]]]]:
    """``(name, replaces)`` of each of this app's squashed migrations, read from the files."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, load=False)
    loader.load_disk()
    return [
        (name, list(migration.replaces))
        for (app, name), migration in loader.disk_migrations.items()
        if app == "agent_sessions" and migration.replaces
    ]


@checks.register(checks.Tags.database)
def check_half_migrated(app_configs=None, databases=None, **kwargs):
    """A database part-way through the chain a squashed migration replaces: Django then leaves the app
    out of ``migrate`` without a word (the replaced files are gone), so the schema would stay behind."""
    from django.db import DatabaseError, connections
    from django.db.migrations.recorder import MigrationRecorder

    squashes = squashed_migrations()
    errors = []
    for alias in databases or []:
        try:
            applied = MigrationRecorder(connections[alias]).applied_migrations()
        except DatabaseError:
            continue
        for name, replaces in squashes:
            done = [key for key in replaces if key in applied]
            if not done or len(done) == len(replaces) or ("agent_sessions", name) in applied:
                continue
            errors.append(
                checks.Error(
                    f"Database '{alias}' is part-way through the migrations that {name} replaces: "
                    f"{len(done)} of {len(replaces)} applied, the last {done[-1][1]}. This release's "
                    "migrate would leave its schema as it is.",
                    hint=f"Migrate it with the last release that still ships those migrations (up to "
                    f"{replaces[-1][1]}), then upgrade to this one; see docs/operations.md, 'Upgrading'.",
                    id="agent_sessions.E030",
                )
            )
    return errors
