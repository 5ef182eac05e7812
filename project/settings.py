"""Settings of the demo project. Everything that differs per deployment comes from the environment."""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = env_bool("DJANGO_DEBUG", True)
DEV_SECRET_KEY = "dev-only-insecure-key-change-me"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", DEV_SECRET_KEY if DEBUG else "")


def is_placeholder_secret(key: str) -> bool:
    """An empty key, this file's development key, Django's generated ``django-insecure-`` ones, a ``change-me``."""
    return not key.strip() or key == DEV_SECRET_KEY or key.startswith("django-insecure-") or "change-me" in key


ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ninja",  # /api/docs serves Swagger UI from ninja's static files, not a CDN (check agent_sessions.W016)
    "pgtrigger",
    "agent_sessions",
]

MIDDLEWARE = [
    # JSON errors, chunked bodies and URL limits for the API's URLs (before anything reads the body).
    "agent_sessions.api.middleware.ApiErrorMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # /static/ (the admin's CSS, the tree page, Swagger UI) from STATIC_ROOT, compressed and cached,
    # with no web server in front (docker-compose.yml); files are collected into the image.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "project.wsgi.application"

DATABASES = {
    "default": dj_database_url.config(
        env="DATABASE_URL",
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
        # Ping a persistent connection before its first use in each request or task, so one
        # the server dropped (restart, failover) is replaced before the request fails.
        conn_health_checks=env_bool("DATABASE_CONN_HEALTH_CHECKS", False),
    )
}
# Prepared statements on Postgres (docs/operations.md): parameters bound by the server and each
# statement prepared from its fifth execution on a connection. Off by default, as in Django, since
# a transaction-mode pooler older than PgBouncer 1.21 cannot carry them; docker-compose.yml turns
# them on (persistent connections straight to Postgres).
PREPARED_STATEMENTS_OPTIONS = {"server_side_binding": True, "prepare_threshold": 5}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool(
    "DATABASE_PREPARED_STATEMENTS", False
):
    DATABASES["default"].setdefault("OPTIONS", {}).update(PREPARED_STATEMENTS_OPTIONS)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Concurrent writers wait for the lock instead of failing at once.
    # IMMEDIATE: a transaction takes the write lock at BEGIN and waits for it; a deferred
    # one that read first fails at once on the lock upgrade ("database is locked").
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("timeout", 30)
    DATABASES["default"]["OPTIONS"].setdefault("transaction_mode", "IMMEDIATE")
    # WAL: readers run beside the writer, and a commit appends to the log instead of
    # rewriting pages (appends 4-5x faster than the default rollback journal);
    # synchronous=NORMAL is the durable-across-app-crashes setting WAL is meant for.
    DATABASES["default"]["OPTIONS"].setdefault("init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", BASE_DIR / "staticfiles"))
MEDIA_ROOT = Path(os.environ.get("DJANGO_MEDIA_ROOT", BASE_DIR / "media"))

# Celery: a real broker when CELERY_BROKER_URL is set, otherwise tasks run inline.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "memory://")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", "CELERY_BROKER_URL" not in os.environ)
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redelivery and bounded broker calls (see docs/operations.md):
# * an unacknowledged task (its worker died: acks_late) goes back to the queue after the
#   visibility timeout; it must exceed the longest countdown a task uses (retry backoff max
#   600 s). A worker that starts re-sends orphaned jobs itself, so this is the fallback.
# * publishing gives up quickly (a hung Redis must not hold a request): 2 s to connect,
#   5 s per socket call, two quick retries; the append itself waits at most
#   AGENT_SESSIONS_ENQUEUE_TIMEOUT_SECONDS (1 s) and leaves the job pending otherwise.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", "900")),
    "socket_connect_timeout": 2,
    "socket_timeout": 5,
    "socket_keepalive": True,
    "retry_on_timeout": False,
}
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_TASK_PUBLISH_RETRY = True
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
# Optional (`celery -A project beat`): workers already re-send pending and orphaned
# compactions at start and every AGENT_SESSIONS_COMPACTION_SWEEP_SECONDS; beat adds a sweep
# that runs even while no worker restarts.
CELERY_BEAT_SCHEDULE = {
    "agent-sessions-sweep-compactions": {
        "task": "agent_sessions.tasks.sweep_pending_compactions",
        "schedule": float(os.environ.get("AGENT_SESSIONS_SWEEP_SECONDS", "60")),
    },
}

# The OpenAI-compatible summariser, from the environment (secrets stay out of files).
for _name in ("SUMMARIZER_API_KEY", "SUMMARIZER_BASE_URL", "SUMMARIZER_MODEL"):
    if os.environ.get(f"AGENT_SESSIONS_{_name}"):
        globals()[f"AGENT_SESSIONS_{_name}"] = os.environ[f"AGENT_SESSIONS_{_name}"]
# The API's rate limits per key and per user ("600/min"; "off": none), else the app's defaults.
for _name in ("API_KEY_RATE_LIMIT", "API_USER_RATE_LIMIT"):
    if os.environ.get(f"AGENT_SESSIONS_{_name}"):
        _rate = os.environ[f"AGENT_SESSIONS_{_name}"]
        globals()[f"AGENT_SESSIONS_{_name}"] = None if _rate.strip().lower() == "off" else _rate
del _name

# Origins allowed to POST (the admin, session-authenticated API calls) behind an HTTPS proxy.
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

if not DEBUG:
    if is_placeholder_secret(SECRET_KEY):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY must be set to a secret of your own when DJANGO_DEBUG is off (it is empty or a "
            "placeholder); e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    SESSION_COOKIE_SECURE = True
    SESSION_COOKIE_HTTPONLY = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_CONTENT_TYPE_NOSNIFF = True
    X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "agent_sessions": {"handlers": ["console"], "level": os.environ.get("AGENT_SESSIONS_LOG_LEVEL", "INFO")},
    },
}
