"""Text the databases cannot hold alike (NUL, lone surrogates, over-long values), handled at one boundary.

Every writer of a text column other than message content (whose JSON escapes both)
refuses such text with :class:`InvalidText` and writes nothing, on SQLite as on Postgres
(before, Postgres raised ``DataError`` for NUL, SQLite stored it, and a lone surrogate was a
bare ``UnicodeEncodeError`` on both).  Lookups by such an id answer "not found".  A summary
the library makes from stored text is cleaned (U+FFFD), so compaction never fails forever
because of what a session contains; an explicit ``add_compaction`` with NUL is refused.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from agent_sessions import (
    DjangoContextProvider,
    DjangoSearchProvider,
    InvalidText,
    Session,
    SessionNotFound,
    StaticProvider,
    create_compact_function,
    registry,
    text,
)
from agent_sessions import tasks as jobs
from agent_sessions.manager import SessionManager
from agent_sessions.models import ApiKey, Compaction, ContextBlockRecord, Message, SearchEntry, SessionRecord
from agent_sessions.storage.orm import DjangoSessionProvider
from agent_sessions.summarizers import OpenAICompatibleSummarizer, extractive_summarizer
from tests.conftest import msg
from tests.support.api import make_user

pytestmark = pytest.mark.django_db

BAD = ["nul\x00inside", "lone\ud800surrogate", "\udfff", "\x00"]
BAD_IDS = pytest.mark.parametrize("bad", BAD, ids=["nul", "surrogate", "low-surrogate", "only-nul"])


def fresh_session(**options) -> Session:
    session = Session.create().for_session(uuid.uuid4().hex)
    for label in options.get("blocks", ["memory"]):
        session = session.with_context(label)
    return session


# ── the boundary module ──────────────────────────────────────────────────────
def test_the_boundary_checks_cleans_and_answers_storable():
    assert text.check("plain é 😀", "x", chars=9) == "plain é 😀"
    for bad in BAD:
        assert not text.storable(bad)
        with pytest.raises(InvalidText, match="x must not contain"):
            text.check(bad, "x")
        assert text.storable(text.clean(bad))
        assert "\ufffd" in text.clean(bad)
    assert text.clean("a\x00b\ud800c") == "a\ufffdb\ufffdc"
    with pytest.raises(InvalidText, match="is 4 characters; the limit is 3"):
        text.check("abcd", "x", chars=3)
    with pytest.raises(InvalidText, match="is 8 bytes; the limit is 7"):
        text.check("😀😀", "x", size=7)
    with pytest.raises(TypeError):
        text.check(5, "x")
    assert text.check(None, "x", optional=True) is None


# ── context blocks and stored prompts ───────────────────────────────────────
@BAD_IDS
def test_block_writes_refuse_unstorable_text_and_write_nothing(bad):
    session = fresh_session()
    with pytest.raises(InvalidText):
        session.replace_context_block("memory", bad)
    with pytest.raises(InvalidText):
        session.append_context_block("memory", bad)
    assert ContextBlockRecord.objects.count() == 0
    session.replace_context_block("memory", "kept")
    with pytest.raises(InvalidText):
        session.append_context_block("memory", bad)
    assert list(ContextBlockRecord.objects.values_list("content", flat=True)) == ["kept"]
    assert session.get_context_block("memory").content == "kept"


@BAD_IDS
def test_the_provider_refuses_unstorable_contents_and_keys(bad):
    provider = DjangoContextProvider("plain-key")
    for write in (provider.set, provider.set_if_absent):
        with pytest.raises(InvalidText):
            write(bad)
    odd = DjangoContextProvider(f"key-{bad}")
    with pytest.raises(InvalidText):
        odd.set("content")
    assert odd.get() is None  # a lookup by such a key finds nothing, on both databases
    assert odd.delete() is False
    assert ContextBlockRecord.objects.count() == 0


@BAD_IDS
def test_a_stored_prompt_with_unstorable_text_is_refused(bad):
    session = Session.create().for_session("p1").with_context("soul", provider=StaticProvider(bad)).with_cached_prompt()
    with pytest.raises(InvalidText):
        session.freeze_system_prompt()
    assert ContextBlockRecord.objects.count() == 0


def test_block_labels_and_contents_have_length_limits(settings):
    settings.AGENT_SESSIONS_MAX_BLOCK_LABEL_CHARS = 10
    fresh_session(blocks=["x" * 10])
    with pytest.raises(InvalidText, match="context label is 11 characters; the limit is 10"):
        fresh_session(blocks=["x" * 11])
    settings.AGENT_SESSIONS_MAX_TEXT_BYTES = 100
    session = fresh_session()
    session.replace_context_block("memory", "é" * 50)
    with pytest.raises(InvalidText, match="101 bytes; the limit is 100"):
        session.append_context_block("memory", "")  # 100 bytes + "" stays; one more byte does not
    with pytest.raises(InvalidText):
        session.replace_context_block("memory", "é" * 50 + "a")
    assert session.get_context_block("memory").content == "é" * 50


# ── search entries ──────────────────────────────────────────────────────────
@BAD_IDS
def test_search_entries_refuse_unstorable_keys_and_contents(bad):
    provider = DjangoSearchProvider(label="kb")
    with pytest.raises(InvalidText):
        provider.set(bad, "content")
    with pytest.raises(InvalidText):
        provider.set("key", bad)
    assert provider.delete(bad) is False
    session = fresh_session(blocks=[]).with_context("kb2", provider=DjangoSearchProvider())
    with pytest.raises(InvalidText):
        session.set_context_entry("kb2", bad, title="entry")
    assert SearchEntry.objects.count() == 0


def test_search_entry_keys_are_limited_in_bytes():
    provider = DjangoSearchProvider(label="kb")
    provider.set("k" * 512, "fits")
    with pytest.raises(InvalidText, match="513 bytes; the limit is 512"):
        provider.set("k" * 511 + "é", "does not")
    assert list(SearchEntry.objects.values_list("content", flat=True)) == ["fits"]


# ── compactions ─────────────────────────────────────────────────────────────
@BAD_IDS
def test_add_compaction_refuses_unstorable_summaries_and_ids(session, bad):
    session.append_message(msg("a", text="first"))
    session.append_message(msg("b", text="second"))
    manager = SessionManager()
    info = manager.create("c")
    manager.append(info.id, msg("x", text="one"))
    for add in (session.add_compaction, lambda *a: manager.add_compaction(info.id, *a)):
        with pytest.raises(InvalidText):
            add(f"summary {bad}", "a", "b")
        with pytest.raises(InvalidText):
            add("summary", bad, "b")
        with pytest.raises(InvalidText):
            add("summary", "a", bad)
    assert Compaction.objects.count() == 0


def test_compaction_ids_are_limited_like_message_ids(session):
    with pytest.raises(InvalidText, match="513 bytes; the limit is 512"):
        session.add_compaction("summary", "a" * 513, "b")
    assert Compaction.objects.count() == 0


def binary_session(session: Session) -> None:
    """A session whose text parts hold what a binary tool output gives: NUL and lone surrogates.

    NUL arrives through the API (stored escaped in the JSON); a lone surrogate only through a
    foreign writer (an escaped ``\\ud800`` in the stored JSON), since appends refuse it.
    """
    session.append_message(msg("u0", text="Please read the file."))
    session.append_message(msg("a0", "assistant", text="It starts with \x7fELF\x00\x01\x02\x00 and then\x00 more."))
    session.append_message(msg("u1", text="What does byte \x00 mean here?"))
    foreign = '{"id":"a1","role":"assistant","parts":[{"type":"text","text":"Raw \\ud800 bytes \\udfff follow."}]}'
    DjangoSessionProvider(session.session_id).insert_rows(
        [{"id": "a1", "parent_id": "u1", "role": "assistant", "content": foreign, "text_content": "Raw bytes"}]
    )
    session.append_message(msg("u2", text="Thanks, and now?"), "a1")
    session.append_message(msg("a2", "assistant", text="Done."))
    session.append_message(msg("u3", text="Bye."))


EXTRACTIVE = create_compact_function(extractive_summarizer, protect_head=1, tail_token_budget=5, min_tail_messages=1)


def test_a_summary_of_binary_text_is_cleaned_and_the_session_compacts(session_id):
    session = Session.create().for_session(session_id).on_compaction(EXTRACTIVE)
    binary_session(session)
    result = session.compact()
    assert result is not None
    [overlay] = session.get_compactions()
    assert text.storable(overlay.summary)
    assert "\ufffd" in overlay.summary  # NUL and the surrogates were replaced, the rest kept
    assert "ELF" in overlay.summary
    assert overlay.summary == result.summary
    history = session.get_history()
    assert history[1]["id"].startswith("compaction_")
    assert history[0]["id"] == "u0"


def test_a_custom_compaction_function_that_echoes_nul_still_compacts(session_id):
    def echo(messages, context=None):
        return {"from_message_id": messages[1]["id"], "to_message_id": messages[2]["id"], "summary": "b\x00\ud800"}

    session = Session.create().for_session(session_id).on_compaction(echo)
    binary_session(session)
    assert session.compact().summary == "b\ufffd\ufffd"
    assert [c.summary for c in session.get_compactions()] == ["b\ufffd\ufffd"]


def test_the_built_in_summarizers_never_echo_nul_or_surrogates():
    prompt = "<conversation>\n[user]\nWhat is \x00 and \ud800 in this file?\n</conversation>\nAbout 100 tokens."
    summary = extractive_summarizer(prompt)
    assert "\ufffd" in summary
    assert text.storable(summary)


class EchoingSummaryHandler(BaseHTTPRequestHandler):
    """A Chat Completions endpoint whose summary holds a NUL and a lone surrogate (as JSON escapes)."""

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        content = "Binary \x00 and \ud800 seen."
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args) -> None:
        pass


def test_a_remote_summary_with_nul_and_surrogates_is_cleaned(session_id):
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoingSummaryHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        summarizer = OpenAICompatibleSummarizer(base_url, model="tiny", api_key="sk-test", timeout=5)
        assert summarizer("Summarise") == "Binary \ufffd and \ufffd seen."
        compact = create_compact_function(summarizer, protect_head=1, tail_token_budget=5, min_tail_messages=1)
        session = Session.create().for_session(session_id).on_compaction(compact)
        binary_session(session)  # its prompt quotes a lone surrogate: sent cleaned, not a UnicodeEncodeError
        assert session.compact().summary == "Binary \ufffd and \ufffd seen."
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_auto_compaction_through_the_celery_task_compacts_a_binary_session(session_id):
    name = "hostile-text-extractive"
    manager = SessionManager(name=name).on_compaction(EXTRACTIVE).compact_after(30)
    try:
        binary_session(manager.get_session(session_id))  # each append past the threshold runs the task
        status = jobs.get_compaction_status(session_id)
        assert (status["status"], status["last_error"]) == ("succeeded", "")
        overlays = manager.get_compactions(session_id)
        assert overlays
        assert all(text.storable(c.summary) for c in overlays)
        assert any("\ufffd" in c.summary for c in overlays)
        forced = jobs.compact_session.apply(args=(name, session_id), kwargs={"force": True}).get()
        assert forced["status"] in ("succeeded", "idle"), forced
    finally:
        registry.unregister(name)


# ── sessions ────────────────────────────────────────────────────────────────
@BAD_IDS
def test_session_fields_refuse_unstorable_text(bad):
    manager = SessionManager()
    info = manager.create("ok")
    for call in (
        lambda: manager.create(bad),
        lambda: manager.create("x", model=bad),
        lambda: manager.create("x", source=bad),
        lambda: manager.create("x", parent_session_id=bad),
        lambda: manager.rename(info.id, bad),
        lambda: manager.fork(info.id, "m", bad),
        lambda: manager.compact_and_split(info.id, "summary", bad),
    ):
        with pytest.raises(InvalidText):
            call()
    assert list(SessionRecord.objects.values_list("name", "end_reason")) == [("ok", None)]


def test_session_fields_have_length_limits_on_both_databases(settings):
    manager = SessionManager()
    manager.create("n" * 1000, model="m" * 200, source="s" * 200)
    for call, match in (
        (lambda: manager.create("n" * 1001), "name is 1001 characters; the limit is 1000"),
        (lambda: manager.create("x", model="m" * 201), "model is 201 characters; the limit is 200"),
        (lambda: manager.create("x", source="é" * 201), "source is 201 characters"),
        (lambda: manager.create("x", parent_session_id="p" * 513), "513 bytes"),
    ):
        with pytest.raises(InvalidText, match=match):
            call()
    settings.AGENT_SESSIONS_MAX_SESSION_NAME_CHARS = 5
    with pytest.raises(InvalidText):
        manager.create("sixsix")
    assert SessionRecord.objects.count() == 1


@BAD_IDS
def test_lookups_by_unstorable_ids_answer_not_found(bad):
    manager = SessionManager()
    info = manager.create("chat")
    manager.append(info.id, msg("a", text="hello"))
    session = manager.get_session(info.id)
    assert session.get_message(bad) is None
    assert session.get_branches(bad) == []
    assert session.get_history(bad) == []
    assert session.get_path_length(bad) == 0
    assert session.get_history_row_stats(bad) == []
    assert session.get_recent_history(bad, max_content_bytes=1000).messages == []
    assert session.delete_messages([bad]) == 0
    assert session.update_message({"id": bad, "role": "user", "parts": []}) is False
    assert manager.get(bad) is None
    manager.delete(bad)
    assert manager.get_history(bad) == []
    assert manager.get_history(info.id, bad) == []
    assert manager.get_branches(info.id, bad) == []
    assert manager.get_branches(bad, "a") == []
    assert manager.get_message_count(bad) == 0
    assert manager.get_compactions(bad) == []
    assert manager.fork_mapping(bad) == {}
    manager.delete_messages(bad, ["a"])
    manager.delete_messages(info.id, [bad])
    with pytest.raises(SessionNotFound):
        manager.fork(bad, "a", "f")
    with pytest.raises(ValueError, match="is not in session"):
        manager.fork(info.id, bad, "f")
    assert [m["id"] for m in manager.get_history(info.id)] == ["a"]
    assert SessionRecord.objects.count() == 1


@BAD_IDS
def test_appends_refuse_unstorable_roles_ids_and_parents(session, bad):
    session.append_message(msg("a"))
    for message, parent in (
        ({"id": "m", "role": bad, "parts": []}, None),
        ({"id": bad, "role": "user", "parts": []}, None),
        (msg("m"), bad),
    ):
        with pytest.raises(InvalidText):
            session.append_message(message, parent)
    with pytest.raises(InvalidText):
        Session.create().for_session(f"s{bad}")
    assert Message.objects.count() == 1


def test_roles_have_a_length_limit(session, settings):
    session.append_message({"id": "ok", "role": "r" * 64, "parts": []})
    with pytest.raises(InvalidText, match="'role' is 65 characters; the limit is 64"):
        session.append_message({"id": "long", "role": "r" * 65, "parts": []})
    manager = SessionManager()
    info = manager.create("bulk")
    with pytest.raises(InvalidText):
        manager.append_all(info.id, [msg("b1"), {"id": "b2", "role": "x" * 2_000_000, "parts": []}])
    settings.AGENT_SESSIONS_MAX_ROLE_CHARS = 4
    with pytest.raises(InvalidText):
        session.append_message({"id": "five", "role": "users", "parts": []})
    assert Message.objects.count() == 1


# ── API keys ────────────────────────────────────────────────────────────────
def test_api_key_names_are_checked_before_the_database(django_user_model, settings):
    user = make_user(django_user_model, "keyholder")
    ApiKey.issue(user, "k" * 100)
    for name, match in (("k" * 101, "101 characters; the limit is 100"), ("a\x00b", "NUL"), ("\ud800", "surrogate")):
        with pytest.raises(InvalidText, match=match):
            ApiKey.issue(user, name)  # unchecked, a long name is a raw DataError on Postgres, stored on SQLite
    with pytest.raises(CommandError, match="101 characters"):
        call_command("create_api_key", "keyholder", "--name", "k" * 101)
    settings.AGENT_SESSIONS_MAX_API_KEY_NAME_CHARS = 3
    with pytest.raises(InvalidText):
        ApiKey.issue(user, "four")
    assert ApiKey.objects.count() == 1


# ── the HTTP API ────────────────────────────────────────────────────────────
def test_api_refuses_over_long_session_fields_with_422(api):
    for body in ({"name": "n" * 1001}, {"name": "x", "model": "m" * 201}, {"name": "x", "source": "s" * 201}):
        response = api.post("/sessions", body)
        assert response.status_code == 422, response.content
        assert response.json()["code"] == "invalid_text"
    sid = api.new_session("short")
    response = api.patch(f"/sessions/{sid}", {"name": "n" * 1001})
    assert (response.status_code, response.json()["code"]) == (422, "invalid_text")
    response = api.post(f"/sessions/{sid}/end", {"reason": "r" * 201})
    assert (response.status_code, response.json()["code"]) == (422, "invalid_text")
    response = api.post(f"/sessions/{sid}/forks", {"at_message_id": "nope", "name": "n" * 1001})
    assert 400 <= response.status_code < 500
    assert list(SessionRecord.objects.values_list("name", "end_reason")) == [("short", None)]


def test_api_refuses_over_long_roles_and_unstorable_text_with_4xx(api):
    sid = api.new_session("roles")
    response = api.post(f"/sessions/{sid}/messages", {"message": {"id": "m", "role": "r" * 65, "parts": []}})
    assert (response.status_code, response.json()["code"]) == (422, "invalid_text")
    response = api.put(f"/sessions/{sid}/context/memory", raw=json.dumps({"content": "a\x00b"}))
    assert response.status_code == 422
    response = api.put(f"/sessions/{sid}/context/memory", raw='{"content": "a\\ud800b"}')
    assert response.status_code == 422
    assert Message.objects.count() == 0
    assert not ContextBlockRecord.objects.filter(content__contains="a").exists()
    # Path parameters no row can have: 4xx, never a database error.
    api.append(sid, "m1")
    for path in (
        "/sessions/a%00b",
        f"/sessions/{sid}/messages/a%00b",
        f"/sessions/{sid}/branches/a%00b",
        f"/sessions/{sid}/context/a%00b",
        "/sessions/%ED%A0%80",  # a surrogate's UTF-8 bytes: not UTF-8, so no session has this id
        f"/sessions/{sid}/messages/%ED%A0%80",
        f"/sessions/{sid}/context/%ED%A0%80",
    ):
        response = api.get(path)
        assert response.status_code in (400, 404), (path, response.status_code, response.content)
    response = api.client.get(f"/api/sessions/{sid}/history?leaf_id=%ED%A0%80", headers=api.headers)
    assert (response.status_code, response.json()["code"]) == (404, "message_not_found")


def test_the_same_outcome_on_both_databases_for_a_nul_block(session_id):
    """Unchecked, SQLite would store the NUL where Postgres raises DataError: both refuse it alike."""
    session = Session.create().for_session(session_id).with_context("memory")
    with pytest.raises(InvalidText):
        session.replace_context_block("memory", "binary\x00blob")
    assert ContextBlockRecord.objects.count() == 0, connection.vendor


def test_a_search_entry_too_big_to_index_is_refused_alike():
    """Postgres refuses a tsvector over 1 MB: an entry whose distinct words pass the index budget is
    refused with InvalidText on both databases (never a raw database error), and nothing is written."""
    words = " ".join(f"w{i:07d}x" for i in range(160_000))  # 1.6 MB of distinct words
    provider = DjangoSearchProvider(label="kb_big")
    with pytest.raises(InvalidText, match="distinct words"):
        provider.set("big", words)
    assert not SearchEntry.objects.filter(label="kb_big").exists()
    provider.set("small", words[:10_000])
    assert [hit["key"] for hit in provider.search("w0000010x")] == ["small"]
