"""The JSON API's model-call routes (SPEC §8): the timeline of a session, the exact input of one reply."""

from __future__ import annotations

import pytest

from agent_sessions import SessionManager
from tests.conftest import msg

pytestmark = pytest.mark.django_db


def recorded(session_id: str, count: int = 1) -> None:
    session = SessionManager().get_session(session_id)
    session.append_message(msg("u1"))
    for i in range(count):
        with session.model_call(model="gpt-test", params={"temperature": i}) as call:
            call.finish(msg(f"a/{i}", "assistant"), usage={"input_tokens": 10 + i}, cost=0.25)


def test_model_calls_page_newest_first(api):
    sid = api.new_session("S")
    recorded(sid, 3)
    response = api.get(f"/sessions/{sid}/model-calls?limit=2")
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], body["limit"], body["offset"]) == (3, 2, 0)
    assert [c["message_id"] for c in body["items"]] == ["a/2", "a/1"]
    first = body["items"][0]
    assert (first["model"], first["params"], first["usage"], first["cost"], first["status"]) == (
        "gpt-test",
        {"temperature": 2},
        {"input_tokens": 12},
        0.25,
        "ok",
    )
    assert api.get(f"/sessions/{sid}/model-calls?offset=2").json()["items"][0]["message_id"] == "a/0"


def test_model_input_of_a_reply_whose_id_has_a_slash(api):
    sid = api.new_session("S")
    recorded(sid)
    response = api.get(f"/sessions/{sid}/messages/a/0/model-input")
    assert response.status_code == 200
    body = response.json()
    assert [m["id"] for m in body["messages"]] == ["u1"]
    assert body["model"] == "gpt-test"
    assert body["system"] == ""
    assert body["tools"] == []
    # the message itself is still served by the message route
    assert api.get(f"/sessions/{sid}/messages/a/0").json()["id"] == "a/0"


def test_no_recorded_call_is_a_json_404(api):
    sid = api.new_session("S")
    recorded(sid)
    response = api.get(f"/sessions/{sid}/messages/u1/model-input")
    assert response.status_code == 404
    assert response.json()["code"] == "model_input_not_found"


def test_another_owners_session_is_not_found(api, bob_api):
    sid = api.new_session("S")
    recorded(sid)
    for path in (f"/sessions/{sid}/model-calls", f"/sessions/{sid}/messages/a/0/model-input"):
        response = bob_api.get(path)
        assert response.status_code == 404, path
        assert response.json()["code"] == "session_not_found"


def test_anonymous_is_refused(anon, api):
    sid = api.new_session("S")
    assert anon.get(f"/sessions/{sid}/model-calls").status_code in (401, 403)
