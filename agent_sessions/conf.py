"""App settings, read in one place.

Every setting is ``AGENT_SESSIONS_<NAME>`` in Django settings; the functions
below read them lazily (so ``override_settings`` works in tests).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    # Hard limits on input, enforced before anything is written.
    "MAX_MESSAGE_BYTES": 4 * 1024 * 1024,
    "MAX_PARTS": 10_000,
    "MAX_QUERY_LENGTH": 1_000,
    # Longest message id and session id, in UTF-8 bytes (btree index rows must stay small).
    "MAX_ID_BYTES": 512,
    # Budget of distinct indexed words (UTF-8 bytes, estimated high) in one message's search
    # text; beyond it the text is indexed truncated (Postgres refuses tsvectors over 1 MB).
    "MAX_INDEXED_TEXT_BYTES": 1_000_000,
    # Deepest nesting of dicts/lists in a message (the message itself is level 1).
    "MAX_JSON_DEPTH": 64,
    # Rows scanned (newest first, per scope) when no index can answer a query (CJK words under 3 characters).
    "SEARCH_SCAN_ROWS": 50_000,
    # Characters of a message's tool errors, inputs, outputs and reasoning kept for search.
    "SEARCH_TOOL_TEXT_CHARS": 32_768,
    # Sessions a SessionManager keeps built in memory (least recently used are dropped).
    "SESSION_CACHE_SIZE": 1_000,
    # Guard against parent cycles written by foreign writers (not a depth cap
    # for real data: a path is never this long).
    "MAX_PATH_DEPTH": 50_000_000,
    # Text search configuration on Postgres (the seed uses 'english').
    "PG_TEXT_SEARCH_CONFIG": "english",
    # Defaults of OpenAICompatibleSummarizer (any Chat Completions endpoint).
    "SUMMARIZER_BASE_URL": "https://api.openai.com/v1",
    "SUMMARIZER_MODEL": "gpt-4o-mini",
    "SUMMARIZER_API_KEY": None,
    # Auto-compaction jobs (agent_sessions.tasks).
    # How long a compaction run's lease lasts without a heartbeat; a live run renews it every
    # COMPACTION_HEARTBEAT_SECONDS, so a dead holder (on another host) is taken over after this.
    "COMPACTION_LEASE_SECONDS": 60,
    "COMPACTION_HEARTBEAT_SECONDS": 10,
    # A Celery worker re-sends pending and orphaned jobs this often (0: only at worker start);
    # no beat needed.
    "COMPACTION_SWEEP_SECONDS": 30,
    # Longest an append waits for the broker when it publishes a compaction task.
    "ENQUEUE_TIMEOUT_SECONDS": 1.0,
    # Retries of a compaction task on transient errors (database, summariser network).
    "COMPACTION_MAX_RETRIES": 5,
    # Upper bound of the exponential retry backoff, in seconds.
    "COMPACTION_RETRY_BACKOFF_MAX": 600,
    # sweep_pending_compactions re-enqueues jobs left pending longer than this.
    "COMPACTION_PENDING_GRACE_SECONDS": 60,
    # Extra modules the worker imports to find named configurations (besides apps' sessions.py).
    "CONFIG_MODULES": [],
}


def get(name: str) -> Any:
    """Return ``settings.AGENT_SESSIONS_<name>`` or its default."""
    return getattr(settings, f"AGENT_SESSIONS_{name}", DEFAULTS[name])


def max_message_bytes() -> int:
    return int(get("MAX_MESSAGE_BYTES"))


def max_parts() -> int:
    return int(get("MAX_PARTS"))


def max_query_length() -> int:
    return int(get("MAX_QUERY_LENGTH"))


def max_json_depth() -> int:
    return max(3, int(get("MAX_JSON_DEPTH")))


def max_path_depth() -> int:
    return int(get("MAX_PATH_DEPTH"))


def pg_text_search_config() -> str:
    return str(get("PG_TEXT_SEARCH_CONFIG"))


def summarizer_base_url() -> str:
    return str(get("SUMMARIZER_BASE_URL"))


def summarizer_model() -> str:
    return str(get("SUMMARIZER_MODEL"))


def summarizer_api_key() -> str | None:
    value = get("SUMMARIZER_API_KEY")
    return None if value is None else str(value)


# ── context blocks and skills (appended by the context work) ──────
DEFAULTS["SKILL_SCAN_WINDOW_BYTES"] = 1024 * 1024


def skill_scan_window_bytes() -> int:
    """Stored bytes of history read per window when restoring or unloading skills."""
    return max(1, int(get("SKILL_SCAN_WINDOW_BYTES")))


def compaction_lease_seconds() -> float:
    return float(get("COMPACTION_LEASE_SECONDS"))


def compaction_heartbeat_seconds() -> float:
    """Seconds between lease renewals of a running compaction (at most a third of the lease)."""
    return max(0.05, min(float(get("COMPACTION_HEARTBEAT_SECONDS")), compaction_lease_seconds() / 3))


def compaction_sweep_seconds() -> float:
    return float(get("COMPACTION_SWEEP_SECONDS"))


def enqueue_timeout_seconds() -> float:
    return max(0.05, float(get("ENQUEUE_TIMEOUT_SECONDS")))


def max_id_bytes() -> int:
    return int(get("MAX_ID_BYTES"))


def max_indexed_text_bytes() -> int:
    return int(get("MAX_INDEXED_TEXT_BYTES"))


def compaction_max_retries() -> int:
    return int(get("COMPACTION_MAX_RETRIES"))


def compaction_retry_backoff_max() -> int:
    return int(get("COMPACTION_RETRY_BACKOFF_MAX"))


def compaction_pending_grace_seconds() -> float:
    return float(get("COMPACTION_PENDING_GRACE_SECONDS"))


def config_modules() -> list[str]:
    return [str(m) for m in get("CONFIG_MODULES") or []]


# ── JSON API (appended by the API work) ────────────────────────────
# Registered configuration (a named SessionManager) the API builds sessions
# with; None: the API's default (a "memory" block, cached prompt, compaction).
DEFAULTS["API_CONFIG"] = None
# Largest request body the API reads, in bytes (413 above it); None: Django's
# DATA_UPLOAD_MAX_MEMORY_SIZE, which Django enforces as well.
DEFAULTS["API_MAX_BODY_BYTES"] = None
# Largest page of sessions and of search results a client may ask for.
DEFAULTS["API_MAX_PAGE_SIZE"] = 100
# An API key's last_used_at is written at most this often (seconds).
DEFAULTS["API_KEY_TOUCH_SECONDS"] = 60
# Longest request URL (path and query, percent-encoded) the API answers; longer ones get a JSON 414.
DEFAULTS["API_MAX_URL_BYTES"] = 4096


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


def search_scan_rows() -> int:
    """Bound of the unindexed substring scan used for short CJK search terms."""
    return max(1, int(get("SEARCH_SCAN_ROWS")))


def search_tool_text_chars() -> int:
    """How much of a message's tool and reasoning text is indexed (0 turns it off)."""
    return max(0, int(get("SEARCH_TOOL_TEXT_CHARS")))


def session_cache_size() -> int:
    """How many built Session objects one SessionManager keeps (LRU)."""
    return max(1, int(get("SESSION_CACHE_SIZE")))
