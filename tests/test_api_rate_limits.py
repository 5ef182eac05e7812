"""The API's edges: rate limits per key and per user (429 with Retry-After), JSON 404 for unknown paths.

The test settings turn the limits off (fuzzing sends thousands of requests with one key); these
tests set small rates and check the shipped defaults separately.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from agent_sessions import conf
from agent_sessions.models import ApiKey
from tests.support.api import Api

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counts():
    cache.clear()
    yield
    cache.clear()


def test_shipped_defaults_limit_every_key_and_user():
    assert conf.DEFAULTS["API_KEY_RATE_LIMIT"] == "600/min"
    assert conf.DEFAULTS["API_USER_RATE_LIMIT"] == "1200/min"


def test_a_key_over_its_limit_gets_429_with_retry_after(settings, alice):
    settings.AGENT_SESSIONS_API_KEY_RATE_LIMIT = "3/min"
    first, second = Api(ApiKey.issue(alice, "one")[1]), Api(ApiKey.issue(alice, "two")[1])
    assert [first.get("/sessions").status_code for _ in range(3)] == [200, 200, 200]
    limited = first.get("/sessions")
    assert limited.status_code == 429
    assert limited.json() == {"detail": "Too many requests.", "code": "rate_limited"}
    assert 1 <= int(limited["Retry-After"]) <= 60
    assert first.post("/sessions", {"name": "x"}).status_code == 429  # writes count too, and write nothing
    assert second.get("/sessions").status_code == 200  # per key: the other key of the same user is not limited


def test_a_user_is_limited_across_keys_and_login(settings, alice):
    settings.AGENT_SESSIONS_API_USER_RATE_LIMIT = "4/min"
    keys = [Api(ApiKey.issue(alice, f"k{i}")[1]) for i in range(3)]
    assert [k.get("/sessions").status_code for k in keys] == [200, 200, 200]
    browser = Client()
    browser.force_login(alice)
    assert browser.get("/api/sessions").status_code == 200
    assert browser.get("/api/sessions").status_code == 429
    assert keys[0].get("/sessions").status_code == 429


def test_limits_off_with_none(settings, api):
    settings.AGENT_SESSIONS_API_KEY_RATE_LIMIT = None
    settings.AGENT_SESSIONS_API_USER_RATE_LIMIT = None
    assert {api.get("/sessions").status_code for _ in range(20)} == {200}


def test_an_unauthenticated_request_is_a_401_not_counted(settings, anon, api):
    settings.AGENT_SESSIONS_API_USER_RATE_LIMIT = "1/min"
    assert {anon.get("/sessions").status_code for _ in range(3)} == {401}
    assert api.get("/sessions").status_code == 200


@pytest.mark.parametrize("method", ["get", "post", "put", "patch", "delete"])
def test_unknown_paths_are_a_json_404_under_every_method(method, alice):
    """A logged-in browser enforcing CSRF, as a real one does: still a 404, not a CSRF 403."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    for path in ("/api/nope", "/api/sessions/x/nope/deeper", "/api/"):
        body = {} if method == "get" else {"data": "{}", "content_type": "application/json"}
        response = getattr(browser, method)(path, **body)
        assert response.status_code == 404, (method, path, response.content)
        assert response.json() == {"detail": "Not found.", "code": "not_found"}
    anonymous = getattr(Client(enforce_csrf_checks=True), method)("/api/nope")
    assert (anonymous.status_code, anonymous.json()["code"]) == (404, "not_found")


def test_a_malformed_rate_names_the_setting(settings, api, caplog):
    settings.AGENT_SESSIONS_API_KEY_RATE_LIMIT = "many"
    response = api.get("/sessions")
    assert (response.status_code, response.json()["code"]) == (500, "server_error")
    assert "AGENT_SESSIONS_API_KEY_RATE_LIMIT = 'many'" in caplog.text
