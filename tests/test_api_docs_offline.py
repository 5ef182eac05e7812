"""``/api/docs`` loads nothing from outside the site, and check W016 names the apps that needs."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders
from django.test import override_settings

from agent_sessions import checks

pytestmark = pytest.mark.django_db  # the suite's session teardown needs the test database


def assets(page: str) -> list[str]:
    """Every ``src=`` and ``href=`` of the page."""
    return re.findall(r"""(?:src|href)=["']([^"']+)["']""", page)


def test_docs_page_loads_only_the_sites_static_files(client):
    response = client.get("/api/docs")
    assert response.status_code == 200
    page = response.content.decode()
    urls = assets(page)
    assert any(u.endswith("swagger-ui-bundle.js") for u in urls), urls
    assert any(u.endswith("swagger-ui.css") for u in urls), urls
    assert "cdn" not in page.lower()
    for url in urls:
        assert url.startswith("/static/"), f"{url} is not one of the site's static files"
        assert finders.find(url.removeprefix("/static/")), f"{url} is not found by the static files finders"


def test_w016_names_each_missing_app(monkeypatch):
    from django.apps import apps

    real = apps.is_installed
    for missing in (["ninja"], ["django.contrib.staticfiles"], ["ninja", "django.contrib.staticfiles"]):
        monkeypatch.setattr(apps, "is_installed", lambda name, missing=missing: name not in missing and real(name))
        (warning,) = checks.check_api_docs_offline()
        assert warning.id == "agent_sessions.W016"
        assert all(f'"{app}"' in warning.msg and f'"{app}"' in warning.hint for app in missing)
        assert "CDN" in warning.msg


def test_w016_is_quiet_when_the_apps_are_installed_or_the_api_is_not_mounted(monkeypatch):
    assert checks.check_api_docs_offline() == []  # the demo project lists both apps
    from django.apps import apps

    monkeypatch.setattr(apps, "is_installed", lambda name: False)
    with override_settings(ROOT_URLCONF="tests.support.urls_admin_only"):
        assert checks.api_docs_mounted() is False
        assert checks.check_api_docs_offline() == []
    assert checks.api_docs_mounted() is True
