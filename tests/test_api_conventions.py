"""JSON API conventions: one error shape, bodies that are JSON objects, unstorable text, REST names,
operations on every resource, pagination, preconditions and the headers clients expect.

Each test's docstring gives the curl equivalent (``$B`` = the API root, ``$H`` = the Bearer header).
The racing-upsert and real-gunicorn checks are in ``tests/e2e/test_api_conventions_server.py``.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from django.db import OperationalError, connection

from agent_sessions.api.errors import classify_database_error
from agent_sessions.models import Compaction, Message, SessionRecord
from tests.support.api import BASE, ui

pytestmark = pytest.mark.django_db

SURROGATE = '"\\ud800"'  # a lone surrogate, as a client's JSON encoder writes it


def assert_error(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert isinstance(body, dict), body
    assert isinstance(body["detail"], str), body
    assert body["detail"], body
    assert isinstance(body["code"], str)
    assert body["code"]
    if code is not None:
        assert body["code"] == code, body
    return body


def snapshot() -> tuple:
    """Everything a rejected request must leave as it was."""
    return (
        list(SessionRecord.objects.order_by("id").values_list("id", "name", "model", "end_reason")),
        list(Message.objects.order_by("seq").values_list("session_id", "message_id", "content")),
        list(Compaction.objects.order_by("seq").values_list("compaction_id", "summary")),
    )


@pytest.fixture
def sid(api) -> str:
    sid = api.new_session("Chat")
    api.append(sid, "m1", "hello world")
    api.append(sid, "m2", "second message")
    return sid


# ── lone surrogates (and NUL) are 422 before the database ─────────────────────────────────────
SURROGATE_CASES = [
    ("post", "/sessions", '{"name": %s}'),
    ("post", "/sessions", '{"model": %s}'),
    ("patch", "/sessions/{sid}", '{"name": %s}'),
    ("put", "/sessions/{sid}/context/memory", '{"content": %s}'),
    ("post", "/sessions/{sid}/context/memory/append", '{"content": %s}'),
    ("post", "/sessions/{sid}/compactions", '{"summary": %s, "from_message_id": "m1", "to_message_id": "m2"}'),
    ("post", "/sessions/{sid}/forks", '{"at_message_id": "m1", "name": %s}'),
    ("post", "/sessions/{sid}/fork", '{"at_message_id": "m1", "name": %s}'),
    ("post", "/sessions/{sid}/message-deletions", '{"ids": [%s]}'),
    ("post", "/sessions/{sid}/delete-messages", '{"ids": [%s]}'),
    ("post", "/sessions/{sid}/split", '{"summary": %s}'),
    (
        "post",
        "/sessions/{sid}/messages",
        '{"message": {"id": "s", "role": "user", "parts": [{"type": "text", "text": %s}]}}',
    ),
    ("post", "/sessions/{sid}/messages", '{"message": {"id": "s", "role": "user", "parts": [], "meta": {%s: 1}}}'),
    ("put", "/sessions/{sid}/messages/m1", '{"id": "m1", "role": "user", "parts": [{"type": "text", "text": %s}]}'),
    ("post", "/sessions/{sid}/tools/set_context", '{"arguments": {"label": "memory", "content": %s}}'),
]


@pytest.mark.parametrize(
    ("method", "path", "template"), SURROGATE_CASES, ids=[f"{m} {p} {t[:20]}" for m, p, t in SURROGATE_CASES]
)
def test_lone_surrogates_are_422_and_write_nothing(api, sid, method, path, template):
    """curl -H "$H" -H 'Content-Type: application/json' -d '{"name":"\\ud800"}' $B/sessions  → 422, nothing stored."""
    before = snapshot()
    response = api.request(method, path.format(sid=sid), raw=template % SURROGATE)
    body = assert_error(response, 422, "validation_error")
    assert "surrogate" in json.dumps(body["errors"])
    assert snapshot() == before


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/sessions", {"name": "a\x00b"}),
        ("post", "/sessions", {"source": "\x00"}),
        ("post", "/sessions/{sid}/end", {"reason": "a\x00"}),
        ("post", "/sessions/{sid}/messages", {"message": ui("a\x00")}),
        ("post", "/sessions/{sid}/compaction-requests", {"leaf_id": "\x00"}),
    ],
)
def test_nul_in_plain_fields_is_422(api, sid, method, path, body):
    """curl -H "$H" -H 'Content-Type: application/json' -d '{"name":"a\\u0000b"}' $B/sessions  → 422."""
    before = snapshot()
    assert_error(api.request(method, path.format(sid=sid), body), 422, "validation_error")
    assert snapshot() == before


def test_tool_arguments_document_the_nul_they_refuse(api, sid):
    """curl -H "$H" -H 'Content-Type: application/json' -d '{"arguments":{"x":[{"k\\u0000":1}]}}'
    $B/sessions/$S/tools/session_search  → 422 invalid_arguments, and the OpenAPI document says so.

    A NUL in a key nested inside ``arguments`` is refused with 422, so the schema describes NUL-free JSON
    all the way down rather than any object (Schemathesis's ST202 flags a refusal the schema allows).
    """
    import jsonschema

    from agent_sessions.api.main import api as ninja_api

    document = json.loads(json.dumps(ninja_api.get_openapi_schema()))
    body_schema = {**document["components"]["schemas"]["ToolCallIn"], "components": document["components"]}
    validator = jsonschema.Draft202012Validator(body_schema)
    refused = [
        {"arguments": {"x": [{"k\x00": 1}]}},
        {"arguments": {"query": "a\x00b"}},
        {"arguments": {"\x00": None}},
        {"arguments": {"x": {"y": {"z": ["\x00"]}}}},
    ]
    before = snapshot()
    for body in refused:
        assert not validator.is_valid(body), body  # the document refuses it ...
        response = api.post(f"/sessions/{sid}/tools/session_search", body)
        assert_error(response, 422, "invalid_arguments")  # ... and so does the server
    assert snapshot() == before
    accepted = {"arguments": {"query": "hello", "x": [{"k": 1, "n": None, "f": 1.5, "t": True}]}}
    assert validator.is_valid(accepted)
    response = api.post(f"/sessions/{sid}/tools/session_search", accepted)
    assert response.status_code == 200, response.content
    assert response.json()["result"].startswith("Error: unknown argument")  # the tool reports, the request succeeds
    response = api.post(f"/sessions/{sid}/tools/session_search", {"arguments": {"query": "hello"}})
    assert response.status_code == 200, response.content
    assert "hello world" in response.json()["result"]


# ── input that can never be stored is 413/422, never 503 ──────────────────────────────────────
@pytest.mark.django_db(transaction=True)
def test_an_id_the_index_cannot_hold_is_413_not_503(api, sid):
    """curl -H "$H" -H 'Content-Type: application/json' -d '{"message":{"id":"<3,000 × x>","role":"user","parts":[]}}'
    $B/sessions/$S/messages  → never 503 (Postgres: the unique index row is too large → 413/422)."""
    before = snapshot()
    incompressible = "".join(uuid.uuid4().hex for _ in range(94))  # 3,008 characters TOAST cannot shrink
    response = api.post(f"/sessions/{sid}/messages", {"message": {"id": incompressible, "role": "user", "parts": []}})
    assert response.status_code in (200, 201, 413, 422), response.content
    assert "Retry-After" not in response
    if response.status_code >= 400:
        assert_error(response, response.status_code)
        assert snapshot() == before
    elif connection.vendor == "postgresql":  # pragma: no cover - the library may cap ids before the database
        pytest.fail("Postgres stored a 3,000-byte id in a btree index")


@pytest.mark.django_db(transaction=True)
def test_more_words_than_a_tsvector_holds_is_413_not_503(api, sid):
    """curl -H "$H" -H 'Content-Type: application/json' -d @1.2MB-of-distinct-words.json $B/sessions/$S/messages
    → 201 (the search text is truncated) or 413, never 503."""
    words = " ".join(f"w{i:07d}x" for i in range(120_000))
    before = snapshot()
    response = api.post(f"/sessions/{sid}/messages", {"message": ui("big", words)})
    assert response.status_code in (201, 413, 422), response.content[:300]
    assert "Retry-After" not in response
    if response.status_code != 201:
        assert_error(response, response.status_code)
        assert snapshot() == before


def test_database_errors_are_classified_by_cause():
    """Permanent errors (SQLSTATE 54/22, over-size) are 413/422; a lost connection stays a retryable 503."""

    class Cause(Exception):
        def __init__(self, sqlstate):
            self.sqlstate = sqlstate

    def wrapped(message: str, sqlstate: str | None) -> OperationalError:
        error = OperationalError(message)
        error.__cause__ = Cause(sqlstate)
        return error

    assert classify_database_error(wrapped("string is too long for tsvector", "54000"))[0] == 413
    assert (
        classify_database_error(wrapped("index row size 3016 exceeds btree version 4 maximum 2704", "54000"))[0] == 413
    )
    assert classify_database_error(wrapped("invalid byte sequence", "22021"))[0] == 422
    assert classify_database_error(wrapped("string or blob too big", None))[0] == 413
    assert classify_database_error(wrapped("connection refused", None))[0] == 503
    assert classify_database_error(wrapped("terminating connection due to administrator command", "57P01"))[0] == 503
    assert classify_database_error(wrapped("database is locked", None))[0] == 503


# ── bodies must be JSON objects ───────────────────────────────────────────────────────────────
@pytest.mark.parametrize("raw", ["[1,2]", '"x"', "null", "42", "true", "[]"])
def test_non_object_bodies_are_422_and_create_nothing(api, raw):
    """curl -H "$H" -H 'Content-Type: application/json' -d '[1,2]' $B/sessions  → 422, no session."""
    before = snapshot()
    body = assert_error(api.post("/sessions", raw=raw), 422, "validation_error")
    assert body["errors"][0]["type"] == "object_type"
    assert snapshot() == before


@pytest.mark.parametrize(
    "path", ["/sessions/{sid}/usage", "/sessions/{sid}/compact", "/sessions/{sid}/tools/set_context"]
)
def test_null_body_is_422_where_it_was_read_as_empty(api, sid, path):
    """curl -H "$H" -H 'Content-Type: application/json' -d 'null' $B/sessions/$S/usage  → 422."""
    assert_error(api.post(path.format(sid=sid), raw="null"), 422, "validation_error")


# ── every error in the JSON shape; 415; documented in OpenAPI ─────────────────────────────────
@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("delete", "/sessions", "GET, POST"),
        ("patch", "/sessions/{sid}/messages/m1", "DELETE, GET, PUT"),
        ("post", "/sessions/{sid}/leaf", "GET"),
        ("put", "/sessions/{sid}/history", "GET"),
    ],
)
def test_405_is_json_with_allow(api, sid, method, path, allow):
    """curl -X DELETE -H "$H" $B/sessions  → 405 {"detail", "code": "method_not_allowed"} with Allow."""
    response = api.request(method, path.format(sid=sid), {})
    assert_error(response, 405, "method_not_allowed")
    assert sorted(m.strip() for m in response["Allow"].split(",")) == allow.split(", ")


@pytest.mark.parametrize(
    "url",
    [
        "/api/sessions/",
        "/api/nope",
        "/api/sessions/%2E%2E%2F%2E%2E%2Fadmin%2F",
        "/api/sessions/x/..%2F..%2Fadmin",
        "/api/sessions/%0A",
        "/api/sessions/%0A/messages/%0A",
    ],
)
def test_404_is_json_everywhere_under_the_prefix(api, url):
    """curl -H "$H" $B/sessions/  → 404 JSON (not Django's HTML page)."""
    response = api.client.get(url, headers=api.headers)
    assert_error(response, 404)


def test_outside_the_prefix_django_keeps_its_own_pages(api):
    """curl $ROOT/nope  → Django's own 404 (the middleware only touches the API)."""
    response = api.client.get("/nope")
    assert response.status_code == 404
    assert "json" not in response["Content-Type"]


def test_414_is_json(api):
    """curl -H "$H" "$B/sessions/$(head -c 5000 /dev/zero | tr '\\0' x)"  → 414 JSON."""
    assert_error(api.get("/sessions/" + "x" * 5000), 414, "uri_too_long")
    assert_error(api.get("/sessions", name="y" * 5000), 414, "uri_too_long")


def test_a_long_invalid_query_string_is_414_and_the_fuzzer_counts_it_as_a_rejection(api):
    """curl -H "$H" "$B/search?q=x&limit=true&limit=%5B%5D…&offset=…" (over 4,096 bytes) → 414 uri_too_long.

    Schemathesis (300 examples, ST201) sent repeated non-integer limit/offset values until the URL was
    too long; 414 refuses it before parsing, so every 4xx the server documents counts as a rejection.
    """
    import tomllib

    from agent_sessions.api.schemas import ERROR_STATUSES

    query = "&".join(["q=x", *(["limit=true", "limit=%5B%5D", "offset=%7B%7D", "offset=false"] * 150)])
    assert len(query) > 4_096
    assert_error(api.client.get(f"{BASE}/search?{query}", headers=api.headers), 414, "uri_too_long")
    config = tomllib.loads((Path(__file__).resolve().parents[1] / "schemathesis.toml").read_text())
    rejection = set(config["checks"]["negative_data_rejection"]["expected-statuses"])
    assert {str(s) for s in ERROR_STATUSES if 400 <= s < 500} - {"412"} <= rejection


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_415_for_a_body_that_is_not_json(api, content_type):
    """curl -H "$H" -H 'Content-Type: text/plain' -d '{"name":"x"}' $B/sessions  → 415, nothing stored."""
    before = snapshot()
    response = api.client.post("/api/sessions", data='{"name": "x"}', content_type=content_type, headers=api.headers)
    assert_error(response, 415, "unsupported_media_type")
    assert snapshot() == before


def test_json_media_types_with_parameters_are_accepted(api):
    """curl -H "$H" -H 'Content-Type: application/json; charset=utf-8' -d '{}' $B/sessions  → 201."""
    for content_type in ("application/json; charset=utf-8", "application/merge-patch+json"):
        response = api.client.post("/api/sessions", data="{}", content_type=content_type, headers=api.headers)
        assert response.status_code == 201, response.content


def test_openapi_documents_every_error_status_with_the_error_schema():
    """curl $B/openapi.json: each operation lists 400…503 with ErrorOut; conditional ones list 412."""
    from agent_sessions.api.main import api as ninja_api

    schema = json.loads(json.dumps(ninja_api.get_openapi_schema()))  # as served (status keys are strings)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            statuses = set(operation["responses"])
            assert {"400", "401", "404", "405", "413", "414", "415", "422", "500", "503"} <= statuses, (method, path)
            ref = operation["responses"]["405"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/ErrorOut")
    conditional = schema["paths"]["/api/sessions/{session_id}/messages/{message_id}"]
    assert "412" in conditional["put"]["responses"]
    assert "412" in conditional["delete"]["responses"]
    assert "412" in schema["paths"]["/api/sessions/{session_id}"]["patch"]["responses"]


# ── reversed compaction ranges; appending to an ended session ─────────────────────────────────
def test_reversed_compaction_range_is_422(api, sid):
    """curl -H "$H" -H 'Content-Type: application/json' -d '{"summary":"s","from_message_id":"m2","to_message_id":"m1"}'
    $B/sessions/$S/compactions  → 422 invalid_range, nothing stored."""
    before = snapshot()
    payload = {"summary": "s", "from_message_id": "m2", "to_message_id": "m1"}
    assert_error(api.post(f"/sessions/{sid}/compactions", payload), 422, "invalid_range")
    assert snapshot() == before
    forward = api.post(f"/sessions/{sid}/compactions", {**payload, "from_message_id": "m1", "to_message_id": "m2"})
    assert forward.status_code == 201
    assert [m["parts"][0]["text"] for m in api.get(f"/sessions/{sid}/history").json()["messages"]] == ["s"]


def test_range_across_branches_is_422(api, sid):
    """curl … -d '{"summary":"s","from_message_id":"m2","to_message_id":"b1"}' (b1 on a sibling branch)  → 422."""
    api.append(sid, "b1", "branch", parent_id="m1")
    payload = {"summary": "s", "from_message_id": "m2", "to_message_id": "b1"}
    assert_error(api.post(f"/sessions/{sid}/compactions", payload), 422, "invalid_range")


def test_append_to_a_split_session_is_409(api, sid):
    """curl -H "$H" -H 'Content-Type: application/json' -d '{"message":{…}}' $B/sessions/$OLD/messages  → 409 after
    POST $B/sessions/$OLD/split; the continuation accepts it."""
    continuation = api.post(f"/sessions/{sid}/split", {"summary": "so far"}).json()["id"]
    before = snapshot()
    assert_error(api.post(f"/sessions/{sid}/messages", {"message": ui("late")}), 409, "session_ended")
    assert_error(api.put(f"/sessions/{sid}/messages", {"message": ui("late")}), 409, "session_ended")
    assert_error(api.put(f"/sessions/{sid}/messages/late", ui("late")), 409, "session_ended")
    assert snapshot() == before
    assert api.post(f"/sessions/{continuation}/messages", {"message": ui("late")}).status_code == 201
    # Editing what is already stored stays possible.
    assert api.put(f"/sessions/{sid}/messages/m1", ui("m1", "fixed typo")).status_code == 200


# ── operations on messages, sessions, forks, prompts and compactions, with pagination ─────────
def test_delete_one_message(api, sid):
    """curl -X DELETE -H "$H" $B/sessions/$S/messages/m1  → 204; again → 404."""
    assert api.delete(f"/sessions/{sid}/messages/m1").status_code == 204
    assert not Message.objects.filter(session_id=sid, message_id="m1").exists()
    assert Message.objects.filter(session_id=sid, message_id="m2").exists()  # the child stays
    assert_error(api.delete(f"/sessions/{sid}/messages/m1"), 404, "message_not_found")


def test_delete_messages_by_ids(api, sid):
    """curl -H "$H" -H 'Content-Type: application/json' -d '{"ids":["m1","zz"]}' $B/sessions/$S/message-deletions"""
    assert api.post(f"/sessions/{sid}/message-deletions", {"ids": ["m1", "zz"]}).json() == {"deleted": 1}


def test_clear_all_messages_and_count(api, sid):
    """curl -H "$H" $B/sessions/$S/message-count; curl -X DELETE -H "$H" $B/sessions/$S/messages  → 204."""
    api.post(f"/sessions/{sid}/compactions", {"summary": "s", "from_message_id": "m1", "to_message_id": "m2"})
    assert api.get(f"/sessions/{sid}/message-count").json() == {"count": 2}
    assert api.delete(f"/sessions/{sid}/messages").status_code == 204
    assert api.get(f"/sessions/{sid}/message-count").json() == {"count": 0}
    assert api.get(f"/sessions/{sid}/compactions").json()["count"] == 0
    assert SessionRecord.objects.filter(id=sid).exists()


def test_list_messages_every_branch_paginated(api, sid):
    """curl -H "$H" "$B/sessions/$S/messages?limit=2&offset=1"  → insertion order, total in count."""
    api.append(sid, "b1", "branch", parent_id="m1")
    page = api.get(f"/sessions/{sid}/messages", limit=2, offset=1).json()
    assert [m["id"] for m in page["messages"]] == ["m2", "b1"]
    assert (page["count"], page["limit"], page["offset"]) == (3, 2, 1)


def test_recent_history(api, sid):
    """curl -H "$H" "$B/sessions/$S/recent-history?max_content_bytes=1"  → the last message, truncated."""
    recent = api.get(f"/sessions/{sid}/recent-history", max_content_bytes=1).json()
    assert [m["id"] for m in recent["messages"]] == ["m2"]
    assert recent["truncated"] is True
    whole = api.get(f"/sessions/{sid}/recent-history", max_content_bytes=10**6).json()
    assert [m["id"] for m in whole["messages"]] == ["m1", "m2"]
    assert whole["truncated"] is False
    assert whole["total_content_bytes"] > 0
    assert_error(api.get(f"/sessions/{sid}/recent-history"), 422, "validation_error")


def test_fork_mapping_and_children(api, sid):
    """curl -H "$H" -d '{"at_message_id":"m2"}' $B/sessions/$S/forks; curl $B/sessions/$F/fork-mapping;
    curl $B/sessions/$S/children"""
    fork = api.post(f"/sessions/{sid}/forks", {"at_message_id": "m2", "name": "f"})
    assert fork.status_code == 201
    fid = fork.json()["id"]
    assert fork["Location"] == f"/api/sessions/{fid}"
    mapping = api.get(f"/sessions/{fid}/fork-mapping").json()
    assert mapping["parent_session_id"] == sid
    assert set(mapping["mapping"]) == {"m1", "m2"}
    copied = {m["id"] for m in api.get(f"/sessions/{fid}/history").json()["messages"]}
    assert set(mapping["mapping"].values()) == copied
    children = api.get(f"/sessions/{sid}/children").json()
    assert [s["id"] for s in children["items"]] == [fid]
    assert children["count"] == 1
    assert api.get(f"/sessions/{sid}/fork-mapping").json()["mapping"] == {}


def test_get_stored_prompt_without_freezing(api, sid):
    """curl -H "$H" $B/sessions/$S/system-prompt  → {"prompt": null, "frozen": false} until a freeze."""
    assert api.get(f"/sessions/{sid}/system-prompt").json() == {"prompt": None, "frozen": False}
    frozen = api.post(f"/sessions/{sid}/system-prompt/freeze").json()["prompt"]
    assert api.get(f"/sessions/{sid}/system-prompt").json() == {"prompt": frozen, "frozen": True}


def test_get_and_delete_a_compaction(api, sid):
    """curl -X DELETE -H "$H" $B/sessions/$S/compactions/$C  → 204; history shows the originals again."""
    created = api.post(f"/sessions/{sid}/compactions", {"summary": "s", "from_message_id": "m1", "to_message_id": "m2"})
    cid = created.json()["id"]
    assert created["Location"] == f"/api/sessions/{sid}/compactions/{cid}"
    assert api.get(f"/sessions/{sid}/compactions/{cid}").json()["summary"] == "s"
    assert len(api.get(f"/sessions/{sid}/history").json()["messages"]) == 1
    assert api.delete(f"/sessions/{sid}/compactions/{cid}").status_code == 204
    assert [m["id"] for m in api.get(f"/sessions/{sid}/history").json()["messages"]] == ["m1", "m2"]
    assert_error(api.get(f"/sessions/{sid}/compactions/{cid}"), 404, "compaction_not_found")
    assert_error(api.delete(f"/sessions/{sid}/compactions/{cid}"), 404, "compaction_not_found")


def test_end_a_session_without_splitting(api, sid):
    """curl -H "$H" -H 'Content-Type: application/json' -d '{"reason":"done"}' $B/sessions/$S/end  → 200;
    appends are 409 after it."""
    ended = api.post(f"/sessions/{sid}/end", {"reason": "done"})
    assert ended.status_code == 200
    assert ended.json()["end_reason"] == "done"
    assert SessionRecord.objects.count() == 1  # no continuation
    assert_error(api.post(f"/sessions/{sid}/messages", {"message": ui("m3")}), 409, "session_ended")
    assert_error(api.post(f"/sessions/{sid}/end", {}), 409, "session_ended")
    other = api.new_session("other")
    assert api.post(f"/sessions/{other}/end").json()["end_reason"] == "ended"


def test_filter_sessions(api, bob_api):
    """curl -H "$H" "$B/sessions?name_contains=kyo&model=gpt&ended=false&created_after=2000-01-01T00:00:00Z" """
    a = api.new_session("Kyoto trip", model="gpt")
    b = api.new_session("Osaka", model="gpt")
    c = api.new_session("kyoto notes", model="claude")
    bob_api.new_session("Kyoto (bob)", model="gpt")
    api.post(f"/sessions/{b}/end")

    def ids(**filters):
        page = api.get("/sessions", **filters).json()
        assert page["count"] == len(page["items"])
        return {s["id"] for s in page["items"]}

    assert ids(name_contains="kyo") == {a, c}
    assert ids(name="Osaka") == {b}
    assert ids(model="gpt") == {a, b}
    assert ids(ended="true") == {b}
    assert ids(ended="false") == {a, c}
    assert ids(created_after="2000-01-01T00:00:00Z") == {a, b, c}
    assert ids(created_before="2000-01-01T00:00:00Z") == set()
    assert ids(updated_before="0005-08-26T22:58:50+17:20") == set()  # an offset Postgres itself would refuse
    assert_error(api.get("/sessions", updated_before="0.5"), 422, "validation_error")  # not a Unix timestamp
    fork = api.post(f"/sessions/{a}/split", {"summary": "s"}).json()["id"]
    assert ids(parent_session_id=a) == {fork}
    assert_error(api.get("/sessions", created_after="yesterday"), 422, "validation_error")


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("/history", "messages"),
        ("/branches?message_id=m1", "messages"),
        ("/compactions", "compactions"),
        ("/context", "blocks"),
        ("/tools", "tools"),
    ],
)
def test_pagination_with_totals(api, custom_config, path, key):
    """curl -H "$H" "$B/sessions/$S/history?limit=1&offset=1"  → one item, count = the total."""
    sid = api.new_session()
    api.append(sid, "m1", "hello world")
    api.append(sid, "m2", "second message")
    api.append(sid, "b1", "branch", parent_id="m1")
    api.append(sid, "b2", "branch", parent_id="m1")
    api.post(f"/sessions/{sid}/compactions", {"summary": "s", "from_message_id": "m1", "to_message_id": "m1"})
    api.post(f"/sessions/{sid}/compactions", {"summary": "t", "from_message_id": "b2", "to_message_id": "b2"})
    url, _, query = path.partition("?")
    params = dict([query.split("=")]) if query else {}
    whole = api.get(f"/sessions/{sid}{url}", **params).json()
    assert whole["count"] == len(whole[key]) >= 2
    page = api.get(f"/sessions/{sid}{url}", limit=1, offset=1, **params).json()
    assert page[key] == whole[key][1:2]
    assert page["count"] == whole["count"]
    assert (page["limit"], page["offset"]) == (1, 1)


def test_search_offset(api, sid):
    """curl -H "$H" "$B/sessions/$S/search?q=apples&limit=1&offset=1"  → the second-best hit."""
    for i in range(3):
        api.append(sid, f"s{i}", f"apples number {i}")
    whole = api.get(f"/sessions/{sid}/search", q="apples").json()["results"]
    second = api.get(f"/sessions/{sid}/search", q="apples", limit=1, offset=1).json()
    assert len(whole) == 3
    assert second["results"] == whole[1:2]
    assert second["offset"] == 1
    across = api.get("/search", q="apples", limit=2, offset=2).json()["results"]
    assert [h["id"] for h in across] == [h["id"] for h in api.get("/search", q="apples").json()["results"][2:4]]


# ── conventions ───────────────────────────────────────────────────────────────────────────────
def test_old_paths_are_deprecated_aliases():
    """curl $B/openapi.json: the RPC-style paths are marked deprecated; their REST names are not."""
    from agent_sessions.api.main import api as ninja_api

    paths = ninja_api.get_openapi_schema()["paths"]
    base = "/api/sessions/{session_id}"
    deprecated = {
        (m, p.removeprefix(base)) for p, ops in paths.items() for m, op in ops.items() if op.get("deprecated")
    }
    assert deprecated == {
        ("post", "/fork"),
        ("post", "/delete-messages"),
        ("put", "/messages"),
        ("post", "/compact"),
        ("get", "/compact"),
        ("post", "/usage"),
    }
    for method, path in (("post", "/forks"), ("post", "/message-deletions"), ("post", "/compaction-requests")):
        assert not paths[base + path][method].get("deprecated")


def test_put_message_is_an_upsert_keyed_by_the_path(api, sid):
    """curl -X PUT -H "$H" -H 'Content-Type: application/json' -d '{"id":"n","role":"user","parts":[]}'
    $B/sessions/$S/messages/n  → 201 + Location, then 200."""
    created = api.put(f"/sessions/{sid}/messages/n", {"id": "n", "role": "user", "parts": []})
    assert created.status_code == 201
    assert created["Location"] == f"/api/sessions/{sid}/messages/n"
    assert Message.objects.get(session_id=sid, message_id="n").parent_id == "m2"
    replaced = api.put(f"/sessions/{sid}/messages/n", ui("n", "now with text"))
    assert replaced.status_code == 200
    assert "Location" not in replaced
    rooted = api.put(f"/sessions/{sid}/messages/r?parent_id=m1", ui("r"))
    assert rooted.status_code == 201
    assert Message.objects.get(session_id=sid, message_id="r").parent_id == "m1"
    assert_error(api.put(f"/sessions/{sid}/messages/q?parent_id=nope", ui("q")), 404, "message_not_found")


def test_usage_increments_return_the_totals(api, sid):
    """curl -H "$H" -H 'Content-Type: application/json' -d '{"input_tokens":3,"cost":0.5}'
    $B/sessions/$S/usage/increments  → the new totals (not the whole session)."""
    api.post(f"/sessions/{sid}/usage/increments", {"input_tokens": 3, "cost": 0.5})
    totals = api.post(f"/sessions/{sid}/usage/increments", {"input_tokens": 2, "output_tokens": 1.0}).json()
    for coerced in ({"cost": False}, {"input_tokens": "5"}, {"input_tokens": 1.5}):
        assert_error(api.post(f"/sessions/{sid}/usage/increments", coerced), 422, "validation_error")
    assert totals == {"input_tokens": 5, "output_tokens": 1, "estimated_cost": 0.5}
    assert api.get(f"/sessions/{sid}/usage").json() == totals


def test_etag_and_if_match_on_a_message(api, sid):
    """curl -X PUT -H "$H" -H 'If-Match: "stale"' -d '{…}' $B/sessions/$S/messages/m1  → 412, unchanged."""
    first = api.get(f"/sessions/{sid}/messages/m1")
    tag = first["ETag"]
    assert tag.startswith('"')
    assert api.get(f"/sessions/{sid}/messages/m1")["ETag"] == tag
    before = snapshot()
    stale = api.client.put(
        f"/api/sessions/{sid}/messages/m1",
        data=json.dumps(ui("m1", "lost update")),
        content_type="application/json",
        headers={**api.headers, "If-Match": '"stale"'},
    )
    assert_error(stale, 412, "precondition_failed")
    assert snapshot() == before
    fresh = api.client.put(
        f"/api/sessions/{sid}/messages/m1",
        data=json.dumps(ui("m1", "edited")),
        content_type="application/json",
        headers={**api.headers, "If-Match": tag},
    )
    assert fresh.status_code == 200
    assert fresh["ETag"] != tag
    # The old tag is stale now, for PUT and DELETE alike.
    again = api.client.delete(f"/api/sessions/{sid}/messages/m1", headers={**api.headers, "If-Match": tag})
    assert_error(again, 412, "precondition_failed")
    # If-Match on a message that does not exist yet never creates it.
    missing = api.client.put(
        f"/api/sessions/{sid}/messages/new",
        data=json.dumps(ui("new")),
        content_type="application/json",
        headers={**api.headers, "If-Match": "*"},
    )
    assert_error(missing, 412, "precondition_failed")


def test_etag_and_if_match_on_a_session(api, sid):
    """curl -X PATCH -H "$H" -H 'If-Match: "stale"' -d '{"name":"x"}' $B/sessions/$S  → 412, name unchanged."""
    tag = api.get(f"/sessions/{sid}")["ETag"]

    def rename(name, if_match):
        return api.client.patch(
            f"/api/sessions/{sid}",
            data=json.dumps({"name": name}),
            content_type="application/json",
            headers={**api.headers, "If-Match": if_match},
        )

    renamed = rename("First", tag)
    assert renamed.status_code == 200
    assert renamed["ETag"] != tag
    assert_error(rename("Second", tag), 412, "precondition_failed")
    assert SessionRecord.objects.get(id=sid).name == "First"
    assert rename("Third", renamed["ETag"]).status_code == 200


def test_location_on_201(api, sid):
    """curl -i -H "$H" -d '{"name":"x"}' $B/sessions  → Location: /api/sessions/<id>."""
    created = api.post("/sessions", {"name": "x"})
    assert created["Location"] == f"/api/sessions/{created.json()['id']}"
    assert api.get(created["Location"].removeprefix("/api")).status_code == 200
    appended = api.post(f"/sessions/{sid}/messages", {"message": ui("a/b c")})
    assert appended["Location"] == f"/api/sessions/{sid}/messages/a%2Fb%20c"
    split = api.post(f"/sessions/{sid}/split", {"summary": "s"})
    assert split["Location"] == f"/api/sessions/{split.json()['id']}"


def _long_conversation(api, sid):
    for i in range(12):
        role = "user" if i % 2 == 0 else "assistant"
        api.append(sid, f"c{i}", f"Message number {i} talks about the Kyoto trip and temples in detail.", role=role)


def test_202_has_location_and_retry_after(api, custom_config):
    """curl -i -X POST -H "$H" $B/sessions/$S/compaction-requests  → 202, Location: …/compaction-status, Retry-After."""
    sid = api.new_session()
    _long_conversation(api, sid)
    response = api.post(f"/sessions/{sid}/compaction-requests")
    assert response.status_code == 202
    assert response["Location"] == f"/api/sessions/{sid}/compaction-status" == response.json()["status_url"]
    assert int(response["Retry-After"]) >= 1
    assert api.get(f"/sessions/{sid}/compaction-status").json()["status"] == "succeeded"


def test_status_says_nothing_to_compact(api, custom_config):
    """curl -X POST $B/sessions/$EMPTYISH/compaction-requests; curl $B/sessions/$S/compaction-status
    → "nothing_to_compact" (not "idle") after a run that found nothing."""
    sid = api.new_session()
    assert api.get(f"/sessions/{sid}/compaction-status").json()["status"] == "idle"
    api.append(sid, "only", "one short message")
    api.post(f"/sessions/{sid}/compaction-requests")
    status = api.get(f"/sessions/{sid}/compaction-status").json()
    assert status["status"] == "nothing_to_compact"
    assert status["finished_at"] is not None
    assert Compaction.objects.filter(session_id=sid).count() == 0


def test_upsert_reports_inserted_from_the_insert_itself(api, sid):
    """curl -X PUT -H "$H" -d '{"message":{"id":"u",…}}' $B/sessions/$S/messages  twice → inserted true, then false
    (the race with 20 clients is in tests/e2e/test_api_conventions_server.py)."""
    first = api.put(f"/sessions/{sid}/messages", {"message": ui("u")})
    second = api.put(f"/sessions/{sid}/messages", {"message": ui("u", "changed")})
    assert (first.status_code, first.json()["inserted"]) == (201, True)
    assert (second.status_code, second.json()["inserted"]) == (200, False)
    assert Message.objects.filter(session_id=sid, message_id="u").count() == 1
