"""Helpers of the compaction tests: a SessionProvider kept in memory, and a chain builder."""

from __future__ import annotations

import uuid

from agent_sessions import StoredCompaction
from agent_sessions.overlays import apply_overlays
from tests.conftest import msg


def chain(session, n, prefix="m", parent=None, words=3):
    """Append ``n`` messages as one chain (optionally below ``parent``); return their ids."""
    ids = []
    for i in range(n):
        mid = f"{prefix}{i}"
        body = " ".join([f"{mid}-word"] * words)
        if i == 0 and parent is not None:
            session.append_message(msg(mid, "user" if i % 2 == 0 else "assistant", body), parent)
        else:
            session.append_message(msg(mid, "user" if i % 2 == 0 else "assistant", body))
        ids.append(mid)
    return ids


class MemoryStorage:
    """A minimal SessionProvider kept in memory (one chain per parent link)."""

    def __init__(self):
        self.messages: dict[str, dict] = {}
        self.parents: dict[str, str | None] = {}
        self.order: list[str] = []
        self.compactions: list[StoredCompaction] = []

    def _leaf(self):
        parents = set(self.parents.values())
        leaves = [m for m in self.order if m not in parents]
        return leaves[-1] if leaves else None

    def get_message(self, message_id):
        return self.messages.get(message_id)

    def get_latest_leaf(self):
        leaf = self._leaf()
        return self.messages[leaf] if leaf else None

    def get_history(self, leaf_id=None):
        leaf = leaf_id or self._leaf()
        path = []
        while leaf is not None and leaf in self.messages:
            path.append(self.messages[leaf])
            leaf = self.parents[leaf]
        return apply_overlays(list(reversed(path)), self.compactions)

    def get_branches(self, message_id):
        return [self.messages[m] for m in self.order if self.parents[m] == message_id]

    def get_path_length(self, leaf_id=None):
        return len(self.get_history(leaf_id))

    def append_message(self, message, parent_id=None):
        if message["id"] in self.messages:
            return False
        self.messages[message["id"]] = message
        self.parents[message["id"]] = self._leaf() if parent_id is None else parent_id
        self.order.append(message["id"])
        return True

    def update_message(self, message):
        self.messages[message["id"]] = message

    def delete_messages(self, ids):
        for mid in ids:
            self.messages.pop(mid, None)

    def clear_messages(self):
        self.__init__()

    def add_compaction(self, summary, from_message_id, to_message_id):
        stored = StoredCompaction(uuid.uuid4().hex, summary, from_message_id, to_message_id, None)
        self.compactions.append(stored)
        return stored

    def get_compactions(self):
        return list(self.compactions)
