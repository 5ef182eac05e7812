"""Hostile input: arbitrary JSON, huge parts, deep nesting, lone surrogates, NUL.

Into the Python API and the HTTP API, every generated message is either stored and
returned identical (Python: the stored JSON text byte-for-byte; HTTP: the same JSON
value), or rejected (``InvalidMessage`` / a 4xx) with nothing written.  Never a 500,
never a database error.  The limits come from settings: ``AGENT_SESSIONS_MAX_MESSAGE_BYTES``,
``MAX_PARTS``, ``MAX_JSON_DEPTH``, ``MAX_QUERY_LENGTH``.
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agent_sessions import InvalidMessage, Session, conf
from agent_sessions.manager import SessionManager
from agent_sessions.models import Message
from agent_sessions.types import dump_message, validate_message

pytestmark = pytest.mark.django_db

HOSTILE = ["\x00", "\ud800", "\udfff", "\u2028", "\ufeff", "é", "😀", "'", '"', "\\", "%", ";", "\n", "*", "(", ")"]
HOSTILE += ["-"]
INJECTIONS = [
    "'; DROP TABLE assistant_messages; --",
    '" OR 1=1 --',
    "a' OR 'x'='x",
    "m1') UNION SELECT content FROM assistant_messages --",
    'NEAR(a b) AND * OR "',
    "$$; SELECT pg_sleep(10); $$",
    "%s %(x)s {0} {}",
]
texts = st.one_of(
    st.text(st.characters(codec=None, categories=None), max_size=30),
    st.text(st.sampled_from(HOSTILE + ["a", "b", " "]), max_size=30),
    st.sampled_from(INJECTIONS),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4), max_leaves=25
)


def nested(depth: int, kind: str) -> object:
    """A value nested ``depth`` levels deep, built without recursion."""
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": value} if kind == "dict" else [value]
    return value


big_text = st.integers(min_value=0, max_value=40_000).map(lambda n: "x" * n)
parts = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(texts, big_text)}),
    st.dictionaries(texts, json_values, max_size=4),
    json_values,
    st.builds(nested, st.integers(1, 120), st.sampled_from(["dict", "list"])),
)
clean_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)
clean_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | clean_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(clean_text, inner, max_size=4),
    max_leaves=25,
)
plausible = st.fixed_dictionaries(
    {
        "id": clean_text.filter(str.strip),
        "role": st.sampled_from(["user", "assistant"]),
        "parts": st.lists(
            st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(texts, big_text)}), clean_json),
            max_size=4,
        ),
    },
    optional={"createdAt": clean_text, "metadata": clean_json},
)
messages = st.one_of(
    plausible,
    plausible,
    st.fixed_dictionaries(
        {
            "id": texts,
            "role": st.one_of(st.sampled_from(["user", "assistant", "tool"]), texts),
            "parts": st.lists(parts, max_size=5),
        },
        optional={"createdAt": texts, "metadata": json_values},
    ),
    st.fixed_dictionaries({"id": st.one_of(texts, json_values), "role": json_values, "parts": json_values}),
    json_values,
)

LIMITS = {
    "AGENT_SESSIONS_MAX_MESSAGE_BYTES": 64_000,
    "AGENT_SESSIONS_MAX_PARTS": 4,
    "AGENT_SESSIONS_MAX_JSON_DEPTH": 40,
}
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def stored_rows(session_id: str) -> list[tuple[str, str]]:
    return list(Message.objects.filter(session_id=session_id).values_list("message_id", "content"))


@override_settings(**LIMITS)
@FUZZ
@given(message=messages)
def test_python_api_stores_identically_or_rejects_cleanly(message):
    session = Session.create().for_session(f"h-{uuid.uuid4().hex}")
    try:
        inserted = session.append_message(message)
    except InvalidMessage:
        assert stored_rows(session.session_id) == []  # nothing written
        return
    assert inserted is True
    event("stored")
    [(mid, content)] = stored_rows(session.session_id)
    assert mid == message["id"]
    assert content == dump_message(message)
    assert dump_message(session.get_message(message["id"])) == dump_message(message)
    assert dump_message(session.get_history()[0]) == dump_message(message)
    assert len(content.encode("utf-8")) <= LIMITS["AGENT_SESSIONS_MAX_MESSAGE_BYTES"]


@override_settings(**LIMITS)
@FUZZ
@given(message=st.one_of(plausible, messages))
def test_http_api_stores_identically_or_answers_4xx(api, message):
    sid = api.new_session("fuzz")
    response = api.post(f"/sessions/{sid}/messages", raw=json.dumps({"message": message}))
    assert response.status_code < 500, response.content
    event(f"HTTP {response.status_code}")
    if response.status_code != 201:
        assert 400 <= response.status_code < 500
        assert stored_rows(sid) == []
        assert set(response.json()) >= {"detail", "code"}
        return
    [returned] = api.get(f"/sessions/{sid}/history").json()["messages"]
    # The JSON value sent: an escaped surrogate pair ("\ud800\udc00") decodes to one character.
    sent = json.loads(json.dumps(message))
    assert returned == sent
    [(_, content)] = stored_rows(sid)
    assert json.loads(content) == sent


@FUZZ
@given(query=st.one_of(texts, st.text(st.characters(codec=None, categories=None), max_size=3000)))
def test_hostile_search_queries_never_fail(query):
    manager = SessionManager()
    session = Session.create().for_session("q")
    needle = {"id": "needle", "role": "user", "parts": [{"type": "text", "text": "a needle among hostile queries"}]}
    session.append_message(needle)  # False after the first example
    results = manager.search(query, limit=5)
    assert isinstance(results, list)
    assert {r.id for r in results} <= {"needle"}
    assert {r.id for r in session.search(query)} <= {"needle"}
    assert [r.id for r in session.search("needle hostile")] == ["needle"]  # the index answers alongside


def test_limits_are_settings_with_sane_defaults(settings):
    ok = {"id": "m", "role": "user", "parts": [{"type": "text", "text": "x" * 1000}]}
    validate_message(ok)
    validate_message({"id": "d", "role": "user", "parts": [nested(60, "dict")]})  # default depth limit 64
    with pytest.raises(InvalidMessage, match="nests deeper than 64"):
        validate_message({"id": "d", "role": "user", "parts": [nested(70, "list")]})
    settings.AGENT_SESSIONS_MAX_MESSAGE_BYTES = 500
    with pytest.raises(InvalidMessage, match="the limit is 500"):
        validate_message(ok)
    settings.AGENT_SESSIONS_MAX_PARTS = 2
    with pytest.raises(InvalidMessage, match="3 parts; the limit is 2"):
        validate_message({"id": "p", "role": "user", "parts": [1, 2, 3]})
    settings.AGENT_SESSIONS_MAX_JSON_DEPTH = 5
    validate_message({"id": "d", "role": "user", "parts": [nested(3, "dict")]})  # message, parts, 3 dicts
    with pytest.raises(InvalidMessage, match="deeper than 5"):
        validate_message({"id": "d", "role": "user", "parts": [nested(4, "dict")]})


def test_append_all_reads_the_limits_once_and_applies_every_one(settings, monkeypatch):
    # append_all reads all six limits once per batch (conf.message_limits) instead of seven
    # settings reads a message; each still applies to every message of the batch, and a
    # refusal anywhere leaves nothing written.
    manager = SessionManager()
    settings.AGENT_SESSIONS_MAX_ID_BYTES = 40  # session ids are 32
    settings.AGENT_SESSIONS_MAX_INDEXED_TEXT_BYTES = 40
    settings.AGENT_SESSIONS_SEARCH_TOOL_TEXT_CHARS = 10
    reads = []
    real = conf.message_limits
    monkeypatch.setattr(conf, "message_limits", lambda: reads.append(1) or real())
    word = "word{} "
    chain = [
        {
            "id": f"m{i}",
            "role": "user",
            "parts": [
                {"type": "text", "text": "".join(word.format(j) for j in range(20))},
                {"type": "tool-x", "toolCallId": f"c{i}", "state": "output-error", "errorText": "E" * 50},
            ],
        }
        for i in range(40)
    ]
    info = manager.create("limits")
    manager.append_all(info.id, chain)
    assert len(reads) == 2  # the batch's read, and the first message's own append
    rows = Message.objects.filter(session_id=info.id).order_by("seq")
    assert [len(r.tool_text) for r in rows] == [10] * 40
    assert {r.text_content for r in rows} == {"word0 word1 word2 word3"}  # 5-byte words, counted twice: 40
    limited = [
        ("AGENT_SESSIONS_MAX_ID_BYTES", 40, {"id": "x" * 41, "role": "user", "parts": []}, "'id' is 41 bytes"),
        ("AGENT_SESSIONS_MAX_PARTS", 2, {"id": "p", "role": "user", "parts": [1, 2, 3]}, "3 parts"),
        ("AGENT_SESSIONS_MAX_JSON_DEPTH", 5, {"id": "d", "role": "user", "parts": [nested(4, "dict")]}, "deeper"),
        ("AGENT_SESSIONS_MAX_MESSAGE_BYTES", 300, {"id": "b", "role": "user", "parts": ["x" * 300]}, "bytes"),
    ]
    for name, value, bad, error in limited:
        with override_settings(**{name: value}):
            target = manager.create(name)
            with pytest.raises(InvalidMessage, match=error):
                manager.append_all(target.id, [{"id": "ok", "role": "user", "parts": []}, bad])
            assert Message.objects.filter(session_id=target.id).count() == 0


def test_brackets_inside_strings_do_not_count_as_nesting():
    # The bracket count of the JSON only bounds the depth; a shallow message full of
    # brackets is walked and accepted, a deep one refused with the depth message.
    brackets = {"id": "b", "role": "user", "parts": [{"type": "text", "text": "[{" * 500}]}
    assert validate_message(brackets).count("[") > 500
    with pytest.raises(InvalidMessage, match="nests deeper than 64"):
        validate_message({"id": "d", "role": "user", "parts": [{"type": "text", "text": "x", "v": nested(65, "dict")}]})
    looped: dict = {"type": "text", "text": "x"}
    looped["self"] = looped
    with pytest.raises(InvalidMessage):
        validate_message({"id": "c", "role": "user", "parts": [looped]})


def test_absurd_nesting_is_rejected_without_recursion(session):
    deep = {"id": "deep", "role": "user", "parts": [nested(200_000, "list")]}
    with pytest.raises(InvalidMessage):
        session.append_message(deep)
    assert session.get_message("deep") is None


def test_huge_message_over_the_limit_is_rejected_at_every_entry_point(session, api):
    huge = {"id": "huge", "role": "user", "parts": [{"type": "text", "text": "x" * (4 * 1024 * 1024)}]}
    with pytest.raises(InvalidMessage, match="bytes; the limit is"):
        session.append_message(huge)
    manager = SessionManager()
    info = manager.create("c")
    with pytest.raises(InvalidMessage):
        manager.append_all(info.id, [{"id": "ok", "role": "user", "parts": []}, huge])
    assert manager.get_message_count(info.id) == 0  # all or nothing
    sid = api.new_session("big")
    response = api.post(f"/sessions/{sid}/messages", raw=json.dumps({"message": huge}))
    assert response.status_code in (413, 422)
    assert stored_rows(sid) == []


def test_query_length_limit_truncates_instead_of_failing(session, settings):
    session.append_message({"id": "a", "role": "user", "parts": [{"type": "text", "text": "alpha"}]})
    query = "alpha " * 40 + "missingword"
    assert session.search(query) == []
    settings.AGENT_SESSIONS_MAX_QUERY_LENGTH = 60
    assert [r.id for r in session.search(query)] == ["a"]  # only the first 60 characters count


MALFORMED_JSON = ("{", "not json", '{"message": ', "\xff\xfe", "[" * 100_000)


@pytest.mark.parametrize(
    "raw",
    [
        "{" * 100_000,
        '{"message": ' + "[" * 50_000 + "]" * 50_000 + "}",
        b'{"message": {"id": "a\xff\xfe", "role": "user", "parts": []}}',
        b"\x00\x00\x00",
        '{"message": {"id": "\\ud800", "role": "user", "parts": []}}',
        '{"message": {"id": "x", "role": "user", "parts": [NaN, Infinity]}}',
        '{"message": {"id": "x\\u0000", "role": "user", "parts": []}}',
        '{"message": {"id": "x", "role": "user\\u0000", "parts": []}}',
        '{"message": {"id": "", "role": "user", "parts": []}}',
        '{"message": {"id": "x", "role": "user", "parts": {}}}',
        '{"message": "not an object"}',
        "[]",
        "",
        *MALFORMED_JSON,
    ],
)
def test_malformed_bodies_are_4xx_and_write_nothing(api, raw):
    sid = api.new_session("raw")
    response = api.post(f"/sessions/{sid}/messages", raw=raw)
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:200])
    if raw in MALFORMED_JSON:  # not JSON at all: 400 with its own code
        assert response.status_code == 400
        assert response.json()["code"] == "malformed_json"
    assert stored_rows(sid) == []


@pytest.mark.parametrize("evil", INJECTIONS)
def test_injection_strings_in_ids_labels_keys_and_queries_are_plain_data(evil, api):
    manager = SessionManager()
    info = manager.create(evil, model=evil, source=evil)
    message = {"id": evil, "role": "user", "parts": [{"type": "text", "text": f"needle {evil}"}]}
    manager.append(info.id, message)
    manager.append(info.id, {"id": evil + "-child", "role": evil, "parts": []}, evil)
    assert [m["id"] for m in manager.get_history(info.id)] == [evil, evil + "-child"]
    assert manager.get_branches(info.id, evil)[0]["id"] == evil + "-child"
    assert isinstance(manager.search(evil), list)
    assert [r.id for r in manager.search("needle") if r.session_id == info.id] == [evil]
    session = Session.create().for_session(info.id).with_context(evil, description=evil)
    session.replace_context_block(evil, evil)
    assert session.get_context_block(evil).content == evil
    fork = manager.fork(info.id, evil, evil)
    assert manager.get_message_count(fork.id) == 1
    manager.delete_messages(info.id, [evil])
    assert [m["id"] for m in manager.get_history(info.id)] == [evil + "-child"]
    assert Message.objects.count() >= 2  # the tables are still there
    sid = api.new_session(evil)
    response = api.post(f"/sessions/{sid}/messages", {"message": message})
    assert response.status_code == 201
    assert api.get(f"/sessions/{sid}/search", q=evil).status_code == 200
    assert api.get("/search", q=evil).status_code == 200
