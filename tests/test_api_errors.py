"""JSON API errors: one shape, fitting status codes, never a 500 on bad input."""

from __future__ import annotations

import json

import pytest

from agent_sessions.models import Message, SessionRecord
from tests.support.api import ui

pytestmark = pytest.mark.django_db


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code
    assert isinstance(body["detail"], str)
    assert body["detail"]
    return body


@pytest.mark.parametrize(
    "body",
    [
        [],
        "a string",
        {"name": 5},
        {"name": ["x"]},
        {"name": None},
    ],
)
def test_wrong_types_are_422_with_details(api, body):
    sid = api.new_session()
    error = assert_error(api.patch(f"/sessions/{sid}", body), 422, "validation_error")
    assert error["errors"]
    assert all({"loc", "msg", "type"} <= set(e) for e in error["errors"])
    assert SessionRecord.objects.get(id=sid).name == "Chat"


def test_body_over_the_api_limit_is_413(api, settings):
    sid = api.new_session()
    settings.AGENT_SESSIONS_API_MAX_BODY_BYTES = 1000
    response = api.post(f"/sessions/{sid}/messages", {"message": ui("big", "x" * 2000)})
    assert_error(response, 413, "body_too_large")
    assert not Message.objects.filter(session_id=sid).exists()
    assert api.post(f"/sessions/{sid}/messages", {"message": ui("small")}).status_code == 201


def test_body_over_djangos_limit_is_413(api, settings):
    sid = api.new_session()
    settings.AGENT_SESSIONS_API_MAX_BODY_BYTES = 10_000_000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = api.post(f"/sessions/{sid}/messages", {"message": ui("big", "x" * 2000)})
    assert_error(response, 413, "body_too_large")


def test_default_limit_follows_djangos(api, settings):
    sid = api.new_session()
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 500
    assert_error(api.post(f"/sessions/{sid}/messages", {"message": ui("big", "x" * 600)}), 413, "body_too_large")


def test_nul_characters(api):
    sid = api.new_session()
    assert_error(api.get(f"/sessions/{sid}/history", leaf_id="a\x00b"), 400, "invalid_characters")
    assert_error(api.get("/sessions/a%00b"), 400, "invalid_characters")
    assert_error(api.patch(f"/sessions/{sid}", {"name": "a\x00b"}), 422, "validation_error")
    assert_error(api.put(f"/sessions/{sid}/context/memory", {"content": "\x00"}), 422, "validation_error")
    assert_error(
        api.post(f"/sessions/{sid}/compactions", {"summary": "\x00", "from_message_id": "a", "to_message_id": "b"}),
        422,
        "validation_error",
    )
    tool = api.post(f"/sessions/{sid}/tools/set_context", {"arguments": {"label": "memory", "content": "a\x00"}})
    assert_error(tool, 422, "invalid_arguments")
    # Inside message parts NUL is fine: it is stored escaped in the JSON.
    api.append(sid, "n", "nul \x00 inside")
    assert api.get(f"/sessions/{sid}/messages/n").json()["parts"][0]["text"] == "nul \x00 inside"


def test_huge_numbers_and_ids(api):
    sid = api.new_session()
    assert_error(api.get("/sessions", limit=10**30), 422, "validation_error")
    assert_error(api.get("/sessions", offset=-1), 422, "validation_error")
    assert_error(api.post(f"/sessions/{sid}/usage", raw='{"input_tokens": 1e400}'), 422, "validation_error")
    assert_error(api.get(f"/sessions/{'x' * 3_900}"), 404, "session_not_found")
    assert_error(api.get(f"/sessions/{'x' * 10_000}"), 414, "uri_too_long")
    deep = json.dumps({"message": {"id": "d", "role": "user", "parts": [{"a": [[[[[[[[[[1]]]]]]]]]]}]}})
    assert api.post(f"/sessions/{sid}/messages", raw=deep).status_code == 201


def test_unknown_route_and_method(api):
    sid = api.new_session()
    assert api.get("/nope").status_code == 404
    assert api.post(f"/sessions/{sid}/leaf", {}).status_code == 405
