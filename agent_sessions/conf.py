"""App settings, read in one place.

Every setting is ``AGENT_SESSIONS_<NAME>`` in Django settings, declared once in
:data:`DEFAULTS` with its default; the functions below read them lazily and clamp
them to usable values. A value read once is kept until Django reports a setting
change (``override_settings`` and pytest-django's ``settings`` do) or swaps the settings
object (``override_settings`` does, also for a deleted setting): looking up a
setting the project leaves unset costs Django a failed attribute lookup each time,
which made settings reads a quarter of a 10,000-message ``append_all``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from django.conf import settings
from django.core.signals import setting_changed

DEFAULTS: dict[str, Any] = {
    # ── input limits, enforced before anything is written ──
    "MAX_MESSAGE_BYTES": 4 * 1024 * 1024,
    "MAX_PARTS": 10_000,
    "MAX_QUERY_LENGTH": 1_000,
    # Longest message id and session id, in UTF-8 bytes (btree index rows must stay small).
    "MAX_ID_BYTES": 512,
    # Deepest nesting of dicts/lists in a message (the message itself is level 1).
    "MAX_JSON_DEPTH": 64,
    # Guard against parent cycles written by foreign writers (not a depth cap
    # for real data: a path is never this long).
    "MAX_PATH_DEPTH": 50_000_000,
    # ── text columns: the same limits on every database (agent_sessions.text checks them) ──
    # Longest message role, in characters.
    "MAX_ROLE_CHARS": 64,
    # Longest session name, in characters.
    "MAX_SESSION_NAME_CHARS": 1_000,
    # Longest session model, source and end_reason, in characters.
    "MAX_SESSION_FIELD_CHARS": 200,
    # Longest context block label, in characters (its stored key adds "_<session id>").
    "MAX_BLOCK_LABEL_CHARS": 200,
    # Longest search entry key, in UTF-8 bytes (it is part of a unique index).
    "MAX_SEARCH_KEY_BYTES": 512,
    # Longest API key name, in characters (the column holds at most 100).
    "MAX_API_KEY_NAME_CHARS": 100,
    # Longest context block content, stored prompt, search entry content and compaction summary (UTF-8 bytes).
    "MAX_TEXT_BYTES": 4 * 1024 * 1024,
    # ── search ──
    # Budget of distinct indexed words (UTF-8 bytes, estimated high) in one message's search
    # text; beyond it the text is indexed truncated (Postgres refuses tsvectors over 1 MB).
    "MAX_INDEXED_TEXT_BYTES": 1_000_000,
    # Rows scanned (newest first, per scope) when no index can answer a query (CJK words under 3 characters).
    "SEARCH_SCAN_ROWS": 50_000,
    # Most terms (words, phrases, exclusions) one query may have; more is refused (SearchTooComplex).
    "SEARCH_MAX_TERMS": 12,
    # Most of those terms that no index serves (CJK words under 3 characters); more is refused.
    "SEARCH_MAX_SCAN_TERMS": 3,
    # Characters of a message's tool errors, inputs, outputs and reasoning kept for search.
    "SEARCH_TOOL_TEXT_CHARS": 32_768,
    # Text search configuration on Postgres (the seed uses 'english').
    "PG_TEXT_SEARCH_CONFIG": "english",
    # ── async API ──
    # Threads (so connections per database) that run the async twins' database work at once, per process.
    "ASYNC_THREADS": 8,
    # ── sessions and context ──
    # Sessions a SessionManager keeps built in memory (least recently used are dropped).
    "SESSION_CACHE_SIZE": 1_000,
    # Stored bytes of history read per window when restoring or unloading skills.
    "SKILL_SCAN_WINDOW_BYTES": 1024 * 1024,
    # ── summariser defaults (OpenAICompatibleSummarizer: any Chat Completions endpoint) ──
    "SUMMARIZER_BASE_URL": "https://api.openai.com/v1",
    "SUMMARIZER_MODEL": "gpt-4o-mini",
    "SUMMARIZER_API_KEY": None,
    # ── auto-compaction jobs ──
    # Where compaction runs (leases, inline runs, Celery dispatch): a dotted path to a
    # CompactionRunner (see agent_sessions.session.compaction).
    "COMPACTION_RUNNER": "agent_sessions.tasks.CeleryCompactionRunner",
    # How long a compaction run's lease lasts without a heartbeat; a live run renews it every
    # COMPACTION_HEARTBEAT_SECONDS, so a dead holder (on another host) is taken over after this.
    # How long the auto-compaction check may add each append's tokens to its last full estimate
    # instead of reading it again (another process's overlay or prompt changes are seen after this).
    "COMPACTION_CHECK_REFRESH_SECONDS": 5.0,
    "COMPACTION_LEASE_SECONDS": 60,
    "COMPACTION_HEARTBEAT_SECONDS": 10,
    # A Celery worker re-sends pending and orphaned jobs this often (0: only at worker start); no beat needed.
    "COMPACTION_SWEEP_SECONDS": 30,
    # Longest an append waits for the broker when it publishes a compaction task.
    "ENQUEUE_TIMEOUT_SECONDS": 1.0,
    # Retries of a compaction task on transient errors (database, summariser network).
    "COMPACTION_MAX_RETRIES": 5,
    # Upper bound of the exponential retry backoff, in seconds.
    "COMPACTION_RETRY_BACKOFF_MAX": 600,
    # sweep_pending_compactions re-enqueues jobs left pending longer than this.
    "COMPACTION_PENDING_GRACE_SECONDS": 60,
    # Extra modules a worker imports to find named configurations (besides apps' sessions.py).
    "CONFIG_MODULES": [],
    # ── JSON API ──
    # Registered configuration (a named SessionManager) the API builds sessions
    # with; None: the API's default (a "memory" block, cached prompt, compaction).
    "API_CONFIG": None,
    # Largest request body the API reads, in bytes (413 above it); None: Django's
    # DATA_UPLOAD_MAX_MEMORY_SIZE, which Django enforces as well.
    "API_MAX_BODY_BYTES": None,
    # Largest page of sessions and of search results a client may ask for.
    "API_MAX_PAGE_SIZE": 100,
    # An API key's last_used_at is written at most this often (seconds).
    "API_KEY_TOUCH_SECONDS": 60,
    # Longest request URL (path and query, percent-encoded) the API answers; longer ones get a JSON 414.
    "API_MAX_URL_BYTES": 4096,
    # Requests one API key may make (ninja's rate syntax, "<requests>/<period>"); None: no limit.
    "API_KEY_RATE_LIMIT": "600/min",
    # Requests one user may make, across all of their keys and their login session; None: no limit.
    "API_USER_RATE_LIMIT": "1200/min",
    # ── live sessions (session events, SPEC §10) ──
    # Emit session events (the session_event signal, and the Redis publish when Redis is configured).
    "SESSION_EVENTS": True,
    # Redis for session events (pub/sub + a per-session backlog); None: a redis:// CELERY_BROKER_URL, else none.
    "REDIS_URL": None,
    # Events kept per session for Last-Event-ID catch-up (a Redis stream, trimmed approximately).
    "EVENTS_BACKLOG": 1000,
    # A session's backlog and event counter expire this long after its last event, in seconds.
    "EVENTS_TTL_SECONDS": 86400,
    # Seconds between heartbeat comments on an idle /events stream.
    "EVENTS_HEARTBEAT_SECONDS": 15.0,
    # Events waiting for the publisher thread; past this, new ones are dropped (logged), never waited for.
    "EVENTS_QUEUE_SIZE": 10000,
    # Resumable chat generations (a reply run apart from the request, its chunks in Redis); None: on when Redis is.
    "CHAT_RESUMABLE": None,
    # A generation's lease (seconds): refreshed while it runs; once it lapses the generation counts as dead.
    "CHAT_LEASE_SECONDS": 10.0,
    # A generation's chunk stream expires this long after its last write, in seconds.
    "CHAT_STREAM_TTL_SECONDS": 3600,
    # Most entries one generation's chunk stream keeps (each entry is what one yield of respond became).
    "CHAT_STREAM_MAXLEN": 100000,
}


_read: dict[str, Any] = {}
_read_from: list[Any] = [None]  # the settings object ``_read`` came from (override_settings swaps it)


def get(name: str) -> Any:
    """Return ``settings.AGENT_SESSIONS_<name>`` or its default."""
    source = object.__getattribute__(settings, "_wrapped")
    if source is not _read_from[0]:
        _read.clear()
        _read_from[0] = source
    try:
        return _read[name]
    except KeyError:
        value = _read[name] = getattr(settings, f"AGENT_SESSIONS_{name}", DEFAULTS[name])
        return value


def _forget(*, setting: str, **kwargs: Any) -> None:
    """Drop the values read so far when an ``AGENT_SESSIONS_*`` setting changes."""
    if setting.startswith("AGENT_SESSIONS_"):
        _read.clear()


setting_changed.connect(_forget, dispatch_uid="agent_sessions.conf")


# ── input limits ────────────────────────────────────────────────────────────


def max_message_bytes() -> int:
    return int(get("MAX_MESSAGE_BYTES"))


def max_parts() -> int:
    return int(get("MAX_PARTS"))


def max_query_length() -> int:
    return int(get("MAX_QUERY_LENGTH"))


def max_id_bytes() -> int:
    return int(get("MAX_ID_BYTES"))


def max_json_depth() -> int:
    return max(3, int(get("MAX_JSON_DEPTH")))


def max_path_depth() -> int:
    return int(get("MAX_PATH_DEPTH"))


def max_role_chars() -> int:
    return max(1, int(get("MAX_ROLE_CHARS")))


def max_session_name_chars() -> int:
    return max(1, int(get("MAX_SESSION_NAME_CHARS")))


def max_session_field_chars() -> int:
    return max(1, int(get("MAX_SESSION_FIELD_CHARS")))


def max_block_label_chars() -> int:
    return max(1, int(get("MAX_BLOCK_LABEL_CHARS")))


def max_search_key_bytes() -> int:
    return max(1, int(get("MAX_SEARCH_KEY_BYTES")))


API_KEY_NAME_COLUMN = 100
"""Width of ``agent_sessions_api_keys.name`` (a varchar): the name limit never exceeds it."""


def max_api_key_name_chars() -> int:
    return max(1, min(int(get("MAX_API_KEY_NAME_CHARS")), API_KEY_NAME_COLUMN))


def max_text_bytes() -> int:
    return max(1, int(get("MAX_TEXT_BYTES")))


class MessageLimits(NamedTuple):
    """The limits a stored message is checked and indexed against, read together."""

    message_bytes: int
    parts: int
    id_bytes: int
    json_depth: int
    indexed_text_bytes: int
    tool_text_chars: int
    role_chars: int


def message_limits() -> MessageLimits:
    """Every message limit in one read: a bulk write takes them once, not seven times a message."""
    return MessageLimits(
        max_message_bytes(),
        max_parts(),
        max_id_bytes(),
        max_json_depth(),
        max_indexed_text_bytes(),
        search_tool_text_chars(),
        max_role_chars(),
    )


# ── search ──────────────────────────────────────────────────────────────────


def max_indexed_text_bytes() -> int:
    return int(get("MAX_INDEXED_TEXT_BYTES"))


def search_scan_rows() -> int:
    """Bound of the unindexed substring scan used for short CJK search terms."""
    return max(1, int(get("SEARCH_SCAN_ROWS")))


def search_max_terms() -> int:
    """Most terms one search query may have (the search language keeps at most 64)."""
    return max(1, int(get("SEARCH_MAX_TERMS")))


def search_max_scan_terms() -> int:
    """Most unindexed (scanned) terms one search query may have; 0 refuses every such term."""
    return max(0, int(get("SEARCH_MAX_SCAN_TERMS")))


def search_tool_text_chars() -> int:
    """How much of a message's tool and reasoning text is indexed (0 turns it off)."""
    return max(0, int(get("SEARCH_TOOL_TEXT_CHARS")))


def pg_text_search_config() -> str:
    return str(get("PG_TEXT_SEARCH_CONFIG"))


# ── async API ───────────────────────────────────────────────────────────────


def async_threads() -> int:
    """How many async calls run their database work at once (each thread keeps one connection per database)."""
    return max(1, int(get("ASYNC_THREADS")))


# ── sessions and context ────────────────────────────────────────────────────


def session_cache_size() -> int:
    """How many built Session objects one SessionManager keeps (LRU)."""
    return max(1, int(get("SESSION_CACHE_SIZE")))


def skill_scan_window_bytes() -> int:
    """Stored bytes of history read per window when restoring or unloading skills."""
    return max(1, int(get("SKILL_SCAN_WINDOW_BYTES")))


# ── summariser ──────────────────────────────────────────────────────────────


def summarizer_base_url() -> str:
    return str(get("SUMMARIZER_BASE_URL"))


def summarizer_model() -> str:
    return str(get("SUMMARIZER_MODEL"))


def summarizer_api_key() -> str | None:
    value = get("SUMMARIZER_API_KEY")
    return None if value is None else str(value)


# ── auto-compaction jobs ────────────────────────────────────────────────────


def compaction_runner() -> str:
    """Dotted path of the CompactionRunner sessions use (the Celery one by default)."""
    return str(get("COMPACTION_RUNNER"))


def compaction_check_refresh_seconds() -> float:
    """Seconds a full threshold estimate is extended append by append (0: read it after every append)."""
    return max(0.0, float(get("COMPACTION_CHECK_REFRESH_SECONDS")))


def compaction_lease_seconds() -> float:
    return float(get("COMPACTION_LEASE_SECONDS"))


def compaction_heartbeat_seconds() -> float:
    """Seconds between lease renewals of a running compaction (at most a third of the lease)."""
    return max(0.05, min(float(get("COMPACTION_HEARTBEAT_SECONDS")), compaction_lease_seconds() / 3))


def compaction_sweep_seconds() -> float:
    return float(get("COMPACTION_SWEEP_SECONDS"))


def enqueue_timeout_seconds() -> float:
    return max(0.05, float(get("ENQUEUE_TIMEOUT_SECONDS")))


def compaction_max_retries() -> int:
    return int(get("COMPACTION_MAX_RETRIES"))


def compaction_retry_backoff_max() -> int:
    return int(get("COMPACTION_RETRY_BACKOFF_MAX"))


def compaction_pending_grace_seconds() -> float:
    return float(get("COMPACTION_PENDING_GRACE_SECONDS"))


def config_modules() -> list[str]:
    """The project's modules to import before looking up a named configuration (``AGENT_SESSIONS_CONFIG_MODULES``)."""
    return list(dict.fromkeys(str(m) for m in get("CONFIG_MODULES") or []))


# ── JSON API ────────────────────────────────────────────────────────────────


def api_config() -> str | None:
    value = get("API_CONFIG")
    return None if value in (None, "") else str(value)


def api_max_body_bytes() -> int | None:
    """The API's own body limit; None when only Django's limit applies."""
    value = get("API_MAX_BODY_BYTES")
    if value is None:
        value = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return None if value is None else int(value)


def api_max_page_size() -> int:
    return max(1, int(get("API_MAX_PAGE_SIZE")))


def api_max_url_bytes() -> int:
    return max(256, int(get("API_MAX_URL_BYTES")))


def api_key_touch_seconds() -> float:
    return float(get("API_KEY_TOUCH_SECONDS"))


# ── live sessions ───────────────────────────────────────────────────────────


def session_events() -> bool:
    return bool(get("SESSION_EVENTS"))


def redis_url() -> str | None:
    """``AGENT_SESSIONS_REDIS_URL``, else a ``redis://`` / ``rediss://`` ``CELERY_BROKER_URL``, else None."""
    value = get("REDIS_URL")
    if value:
        return str(value)
    try:
        return _read["(redis broker)"]  # kept like the settings above: read on every event
    except KeyError:
        broker = getattr(settings, "CELERY_BROKER_URL", None)
        found = broker if isinstance(broker, str) and broker.startswith(("redis://", "rediss://")) else None
        _read["(redis broker)"] = found
        return found


def events_backlog() -> int:
    return max(1, int(get("EVENTS_BACKLOG")))


def events_ttl_seconds() -> int:
    return max(1, int(get("EVENTS_TTL_SECONDS")))


def events_heartbeat_seconds() -> float:
    return max(0.05, float(get("EVENTS_HEARTBEAT_SECONDS")))


def events_queue_size() -> int:
    return max(1, int(get("EVENTS_QUEUE_SIZE")))


def chat_resumable() -> bool:
    """``AGENT_SESSIONS_CHAT_RESUMABLE``; unset (None): on exactly when Redis is configured."""
    value = get("CHAT_RESUMABLE")
    if value is None:
        return redis_url() is not None
    return bool(value) and redis_url() is not None


def chat_lease_seconds() -> float:
    return max(0.5, float(get("CHAT_LEASE_SECONDS")))


def chat_stream_ttl_seconds() -> int:
    return max(60, int(get("CHAT_STREAM_TTL_SECONDS")))


def chat_stream_maxlen() -> int:
    return max(100, int(get("CHAT_STREAM_MAXLEN")))
