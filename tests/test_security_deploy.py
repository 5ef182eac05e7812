"""Production settings: ``manage.py check --deploy`` reports nothing.

The demo project's production branch (``DJANGO_DEBUG=false``) takes SECRET_KEY and
ALLOWED_HOSTS from the environment, sets secure cookies, HTTPS redirect and HSTS, and
refuses to start without a secret key.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL", "CELERY_"))}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, "DJANGO_SETTINGS_MODULE": "project.settings", **env},
    )


PRODUCTION = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(48)[:50],
    "DJANGO_ALLOWED_HOSTS": "sessions.example.com",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/9",
}


def test_check_deploy_reports_no_issues():
    assert len(PRODUCTION["DJANGO_SECRET_KEY"]) == 50
    result = _manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_production_settings_come_from_the_environment():
    key = PRODUCTION["DJANGO_SECRET_KEY"]
    code = (
        "from django.conf import settings as s; "
        f"print(s.DEBUG, s.SECRET_KEY == {key!r}, s.ALLOWED_HOSTS, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
        "s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS >= 31536000)"
    )
    result = _manage("shell", "-c", code, **PRODUCTION)
    expected = ["False", "True", "['sessions.example.com']", "True", "True", "True", "True"]
    assert result.stdout.strip().splitlines()[-1].split() == expected, result.stdout + result.stderr


def test_production_refuses_to_start_without_a_secret_key():
    env = {k: v for k, v in PRODUCTION.items() if k != "DJANGO_SECRET_KEY"}
    result = _manage("check", **env)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in result.stderr
