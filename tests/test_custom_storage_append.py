"""Custom storage keeps the duplicate-id contract even when its ``append_message`` returns None."""

from __future__ import annotations

import asyncio

import pytest

from agent_sessions import Session
from agent_sessions.storage.orm import OMITTED, DjangoSessionProvider
from tests.conftest import msg

pytestmark = pytest.mark.django_db(transaction=True)


class SeedLikeList:
    """An in-memory provider like the seed's examples: append returns None and never dedupes."""

    def __init__(self):
        self.rows: list[dict] = []
        self.appends = 0

    def append_message(self, message, parent_id=None):
        self.appends += 1
        self.rows.append(message)

    def get_message(self, message_id):
        return next((m for m in self.rows if m["id"] == message_id), None)

    def get_history(self, leaf_id=None):
        return list(self.rows)


class SeedLikeDatabase:
    """A provider over the real tables whose append returns None (like a TypeScript ``Promise<void>``)."""

    def __init__(self, session_id):
        self.inner = DjangoSessionProvider(session_id)
        self.appends = 0

    def append_message(self, message, parent_id=OMITTED):
        self.appends += 1
        self.inner.append_message(message, parent_id)

    def get_message(self, message_id):
        return self.inner.get_message(message_id)

    def get_history(self, leaf_id=None):
        return self.inner.get_history(leaf_id)


class BoolAnswering(SeedLikeList):
    """A provider that dedupes itself and says so: it is trusted, with no extra read."""

    def __init__(self):
        super().__init__()
        self.reads = 0

    def append_message(self, message, parent_id=None):
        self.appends += 1
        if any(m["id"] == message["id"] for m in self.rows):
            return False
        self.rows.append(message)
        return True

    def get_message(self, message_id):
        self.reads += 1
        return super().get_message(message_id)


def test_known_id_returns_false_and_is_not_stored_twice():
    store = SeedLikeList()
    session = Session.create(store)
    assert session.append_message(msg("a")) is True
    assert session.append_message(msg("a", text="again")) is False
    assert store.appends == 1
    assert [m["parts"][0]["text"] for m in store.rows] == ["a text"]


def test_on_the_database_too(session_id):
    store = SeedLikeDatabase(session_id)
    session = Session.create(store)
    assert session.append_message(msg("a")) is True
    assert session.append_message(msg("b")) is True
    assert session.append_message(msg("a", text="again")) is False
    assert store.appends == 2
    assert [m["id"] for m in session.get_history()] == ["a", "b"]
    assert session.get_message("a")["parts"][0]["text"] == "a text"


def test_async_twin_keeps_the_contract(session_id):
    store = SeedLikeDatabase(session_id)
    session = Session.create(store)

    async def run():
        return [await session.aappend_message(msg("x")), await session.aappend_message(msg("x"))]

    assert asyncio.run(run()) == [True, False]
    assert store.appends == 1


def test_provider_answering_bool_is_trusted_without_a_read():
    store = BoolAnswering()
    session = Session.create(store)
    assert session.append_message(msg("a")) is True
    reads_after_first = store.reads
    assert session.append_message(msg("a")) is False
    assert session.append_message(msg("b")) is True
    assert store.reads == reads_after_first  # after the first bool, the provider's answer is enough
    assert [m["id"] for m in store.rows] == ["a", "b"]
