"""Input limits at the shipped values (no override_settings), on SQLite and Postgres alike.

A fixed large case near each limit (4 MiB message, 10,000 parts, depth 64, 512-byte ids,
~2 MB of distinct words for the search index), and a hypothesis corpus of 10,000
realistic messages (many distinct words, long ids, many parts, CJK, lone surrogates):
every message is stored or refused with ``InvalidMessage``; never a raw database error.
"""

from __future__ import annotations

import json
import os
import random

import pytest
from django.db import DatabaseError
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from agent_sessions import InvalidMessage, MessageTooLarge, Session, conf
from agent_sessions.models import Message
from agent_sessions.types import fit_index

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


def distinct_words(total_bytes: int, seed: int = 0, *, cjk: bool = False) -> str:
    """Space-separated words that never repeat, about ``total_bytes`` long."""
    if cjk:  # three CJK ideographs per word, each word different
        base, span = 0x4E00, 0x9FA5 - 0x4E00
        words, size, i = [], 0, seed * 7919
        while size < total_bytes:
            word = "".join(chr(base + (i // span**k) % span) for k in range(3))
            words.append(word)
            size += len(word.encode()) + 1
            i += 1
        return " ".join(words)
    count = total_bytes // 9
    return " ".join(f"w{seed:02d}{i:06d}" for i in range(count))


def message(mid: str, text: str, role: str = "user") -> dict:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text}]}


def stored_text(session_id: str, mid: str) -> str:
    return Message.objects.get(session_id=session_id, message_id=mid).text_content


def test_the_shipped_limits_are_the_documented_ones():
    assert conf.max_message_bytes() == 4 * MIB
    assert conf.max_parts() == 10_000
    assert conf.max_json_depth() == 64
    assert conf.max_id_bytes() == 512
    assert conf.max_indexed_text_bytes() == 1_000_000


def test_two_megabytes_of_distinct_words_are_stored_and_indexed_truncated(session):
    text = distinct_words(int(1.98 * 1_000_000))
    assert session.append_message(message("big", text)) is True  # Postgres: no "too long for tsvector"
    [stored] = session.get_history()
    assert stored["parts"][0]["text"] == text  # the message itself is never cut
    indexed = stored_text(session.session_id, "big")
    assert text.startswith(indexed)
    assert 400_000 < len(indexed) < len(text)
    assert [r.id for r in session.search("w00000001")] == ["big"]  # early words are found
    assert session.search("w00219000") == []  # words past the cut are not indexed


def test_full_text_budget_plus_full_tool_text_still_fits_the_index(session):
    """The text parts at the index budget and a tool output at the tool-text cap, in one message."""
    tool_output = distinct_words(4 * conf.search_tool_text_chars(), seed=7, cjk=True)
    big = {
        "id": "both",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": distinct_words(int(1.98 * 1_000_000))},
            {"type": "tool-fetch", "toolCallId": "c1", "state": "output-available", "input": {}, "output": tool_output},
        ],
    }
    assert session.append_message(big) is True
    assert [r.id for r in session.search("w00000001")] == ["both"]
    assert [r.id for r in session.search(tool_output.split(" ", 1)[0])] == ["both"]


def test_cjk_distinct_words_near_the_index_budget(session):
    text = distinct_words(1_500_000, cjk=True)
    assert session.append_message(message("cjk", text)) is True
    assert stored_text(session.session_id, "cjk") == fit_index(text)
    first = text.split(" ", 1)[0]
    assert [r.id for r in session.search(first)] == ["cjk"]


def test_one_huge_word_is_cut_not_dropped(session):
    text = "x" * (3 * MIB)
    assert session.append_message(message("w", text)) is True
    assert len(stored_text(session.session_id, "w")) == conf.max_indexed_text_bytes() // 2


def test_a_message_just_under_the_size_limit_is_stored_and_one_over_is_refused(session):
    overhead = len(json.dumps(message("edge", ""), separators=(",", ":")).encode())
    fits = message("edge", "a " * ((4 * MIB - overhead) // 2))
    assert session.append_message(fits) is True
    over = message("over", "a" * (4 * MIB - overhead + 1))
    with pytest.raises(MessageTooLarge, match="the limit is 4194304"):
        session.append_message(over)
    assert session.get_message("over") is None


def test_ten_thousand_parts_are_stored_and_one_more_is_refused(session):
    parts = [{"type": "text", "text": f"part{i}"} for i in range(10_000)]
    assert session.append_message({"id": "parts", "role": "user", "parts": parts}) is True
    assert len(session.get_message("parts")["parts"]) == 10_000
    assert [r.id for r in session.search("part9999")] == ["parts"]
    with pytest.raises(MessageTooLarge, match="10001 parts"):
        session.append_message({"id": "more", "role": "user", "parts": [*parts, {"type": "text", "text": "x"}]})


def test_depth_sixty_four_is_stored_and_sixty_five_is_refused(session):
    def nested(depth: int) -> object:
        value: object = "leaf"
        for _ in range(depth - 2):  # the message is level 1, its parts list level 2
            value = {"k": value}
        return value

    assert session.append_message({"id": "deep", "role": "user", "parts": [nested(64)]}) is True
    with pytest.raises(InvalidMessage, match="deeper than 64"):
        session.append_message({"id": "deeper", "role": "user", "parts": [nested(66)]})


@pytest.mark.parametrize("char", ["a", "é", "語", "😀"])
def test_ids_up_to_512_bytes_are_stored_and_longer_ones_refused(session, char):
    width = len(char.encode())
    longest = char * (512 // width)
    assert session.append_message(message(longest, "fits")) is True
    assert session.get_message(longest)["id"] == longest
    for too_long in (char * (512 // width + 1), char * (2_700 // width)):  # 2,700 bytes broke the btree on Postgres
        with pytest.raises(MessageTooLarge, match="the limit is 512"):
            session.append_message(message(too_long, "no"))
    assert [m["id"] for m in session.get_history()] == [longest]


def test_a_session_id_over_512_bytes_is_refused_before_the_database(db):
    Session.create().for_session("s" * 512).append_message(message("m", "fits"))
    with pytest.raises(InvalidMessage, match="session id is 2700 bytes"):
        Session.create().for_session("s" * 2700)
    assert not Message.objects.filter(session_id="s" * 2700).exists()


def test_http_answers_413_for_a_long_id_and_201_for_two_megabytes_of_distinct_words(api):
    sid = api.new_session("limits")
    response = api.post(f"/sessions/{sid}/messages", {"message": message("i" * 2_700, "x")})
    assert response.status_code == 413
    assert response.json()["code"] == "message_too_large"
    response = api.post(f"/sessions/{sid}/messages", {"message": message("big", distinct_words(1_980_000))})
    assert response.status_code == 201, response.content
    response = api.post(f"/sessions/{sid}/messages", {"message": {"id": "p", "role": "user", "parts": [{}] * 10_001}})
    assert response.status_code == 413
    assert response.json()["code"] == "message_too_large"


# ── the corpus ───────────────────────────────────────────────────────────────

SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]
WORDS = st.builds(lambda seed, n: distinct_words(n, seed), st.integers(0, 99), st.integers(1, 40))


@st.composite
def ids(draw) -> str:
    kind = draw(st.sampled_from(["short", "long", "cjk", "emoji", "surrogate", "edge"]))
    if kind == "short":
        return draw(st.text(min_size=1, max_size=20))
    unit = {"long": "a", "cjk": "語", "emoji": "😀", "surrogate": "a", "edge": "é"}[kind]
    width = len(unit.encode())
    n = draw(st.integers(1, 700 // width)) if kind != "edge" else draw(st.sampled_from([256, 257]))
    value = unit * n
    if kind == "surrogate":
        value = value[: n // 2] + draw(st.sampled_from(SURROGATES)) + value[n // 2 :]
    return value


@st.composite
def texts(draw) -> str:
    seed = draw(st.integers(0, 2**32))
    # Hypothesis favours small draws, so rare branches are decided by a seeded coin instead.
    kind = "huge" if random.Random(seed).random() < 0.003 else None
    kind = kind or draw(st.sampled_from(["words"] * 6 + ["cjk", "unicode", "surrogate"]))
    if kind == "words":
        return distinct_words(draw(st.integers(1, 2_000)), seed % 100)
    if kind == "cjk":
        return distinct_words(draw(st.integers(3, 2_000)), seed % 100, cjk=True)
    if kind == "unicode":
        return draw(st.text(max_size=60))
    if kind == "surrogate":
        return "text " + draw(st.sampled_from(SURROGATES)) + " more"
    # rare (3 in 1,000), near or over the limits: up to 4.3 MB of distinct words
    return distinct_words(random.Random(seed).choice([300_000, 1_100_000, 2_000_000, 4_300_000]), seed % 100)


@st.composite
def messages(draw) -> dict:
    many = random.Random(draw(st.integers(0, 2**32))).random() < 0.002  # one in 500 near the parts limit
    n_parts = draw(st.sampled_from([9_999, 10_000, 10_001])) if many else draw(st.integers(0, 4))
    if n_parts > 4:
        parts = [{"type": "text", "text": f"p{i}"} for i in range(n_parts)]
    else:
        parts = [{"type": "text", "text": draw(texts())} for _ in range(n_parts)]
    role = draw(st.sampled_from(["user", "assistant", "tool", "system", "语"]))
    return {"id": draw(ids()), "role": role, "parts": parts}


CORPUS = int(os.environ.get("AGENT_SESSIONS_CORPUS_SIZE", "10000"))
BATCH = 50  # messages per hypothesis example (the per-example overhead dominates otherwise)


@settings(
    max_examples=max(1, CORPUS // BATCH), deadline=None, database=None, phases=[Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)  # fmt: skip
@given(batch=st.lists(messages(), min_size=BATCH, max_size=BATCH))
def test_corpus_of_ten_thousand_messages_never_raises_a_database_error(session, batch):
    stored_ids = STORED.setdefault(session.session_id, set())
    for corpus_message in batch:
        _append_checked(session, corpus_message, stored_ids)


STORED: dict[str, set[str]] = {}


def _append_checked(session, corpus_message: dict, stored_ids: set[str]) -> None:
    """Stored and read back identical, or refused with InvalidMessage and nothing written."""
    mid = corpus_message["id"]
    try:
        inserted = session.append_message(corpus_message)
    except InvalidMessage:
        if mid not in stored_ids:
            assert session.get_message(mid) is None  # refused: nothing written
        return
    except DatabaseError as exc:  # the failure this corpus exists to catch
        pytest.fail(f"raw database error for id of {len(mid)} chars: {type(exc).__name__}: {exc}")
    assert inserted is (mid not in stored_ids)  # a repeated id is kept as first stored
    if inserted:
        stored_ids.add(mid)
        assert session.get_message(mid) == corpus_message
