"""Context blocks behind Session: provider kinds, init, limits, readonly, append rule, runtime add/remove, wiring."""

from __future__ import annotations

import asyncio

import pytest

from agent_sessions import (
    ContextBlock,
    ContextConfig,
    ContextReadOnly,
    ContextTooLarge,
    DjangoContextProvider,
    DjangoSessionProvider,
    Session,
    StaticProvider,
    estimate_string_tokens,
)
from agent_sessions.models import ContextBlockRecord

pytestmark = pytest.mark.django_db


class Memory:
    """A writable provider that counts calls (sync)."""

    def __init__(self, content=None):
        self.content, self.inits, self.gets = content, [], 0

    def init(self, label):
        self.inits.append(label)

    def get(self):
        self.gets += 1
        return self.content

    def set(self, content):
        self.content = content


class AsyncMemory:
    """The same with coroutine methods."""

    def __init__(self, content=""):
        self.content, self.inits = content, []

    async def init(self, label):
        self.inits.append(label)

    async def get(self):
        return self.content

    async def set(self, content):
        self.content = content


class AsyncSkills:
    async def get(self):
        return "- a: first"

    async def load(self, key):
        return {"a": "A doc"}.get(key)


class AsyncSearch:
    async def get(self):
        return "1 entry"

    async def search(self, query):
        return [{"key": "k", "content": f"hit for {query}"}]

    async def set(self, key, content):
        pass


class Failing:
    def get(self):
        return "x"

    def set(self, content):
        raise OSError("disk on fire")


def flags(block: ContextBlock):
    return block.writable, block.is_skill, block.is_searchable


# ── provider kinds ──────────────────────────────────────────────────
def test_four_kinds_detected_by_duck_typing_sync_and_async(session):
    session.with_context("soul", provider=StaticProvider("hi"))
    session.with_context("mem", provider=AsyncMemory("m"))
    session.with_context("skills", provider=AsyncSkills())
    session.with_context("kb", provider=AsyncSearch())
    blocks = {b.label: b for b in session.get_context_blocks()}
    assert [b.label for b in session.get_context_blocks()] == ["soul", "mem", "skills", "kb"]
    assert flags(blocks["soul"]) == (False, False, False)
    assert flags(blocks["mem"]) == (True, False, False)
    assert flags(blocks["skills"]) == (False, True, False)  # no set(): loadable, not writable
    assert flags(blocks["kb"]) == (True, False, True)  # search with set(): keyed writes allowed
    assert blocks["mem"].content == "m"
    assert blocks["skills"].content == "- a: first"
    assert session.load_skill("skills", "a") == "A doc"
    assert session.search_context("kb", "q") == [{"key": "k", "content": "hit for q"}]


def test_block_snapshot_fields(session):
    session.with_context("memory", description="Learned facts", max_tokens=1100)
    block = session.replace_context_block("memory", "User likes coffee.")
    assert block == ContextBlock(
        label="memory",
        description="Learned facts",
        content="User likes coffee.",
        tokens=estimate_string_tokens("User likes coffee."),
        max_tokens=1100,
        writable=True,
        is_skill=False,
        is_searchable=False,
    )
    assert session.get_context_block("memory") == block
    assert session.get_context_block("nope") is None


def test_init_called_once_with_label_before_first_get(session):
    provider = Memory("hello")
    session.with_context("notes", provider=provider)
    assert provider.inits == []  # lazy
    session.get_context_blocks()
    session.get_context_block("notes")
    session.replace_context_block("notes", "new")
    session.refresh_system_prompt()
    assert provider.inits == ["notes"]
    session.for_session("another")  # re-resolution does not init the same provider again
    session.get_context_blocks()
    assert provider.inits == ["notes"]


def test_providers_loaded_once_then_cached(session):
    provider = Memory("v")
    session.with_context("notes", provider=provider)
    session.get_context_blocks()
    session.get_context_block("notes")
    assert provider.gets == 1
    session.refresh_system_prompt()
    assert provider.gets == 2


# ── write rules ─────────────────────────────────────────────────────
def test_max_tokens_enforced_on_replace_and_append_content_unchanged(session):
    session.with_context("memory", max_tokens=10)
    session.replace_context_block("memory", "short fact")
    with pytest.raises(ContextTooLarge):
        session.replace_context_block("memory", "word " * 50)
    with pytest.raises(ContextTooLarge):
        session.append_context_block("memory", "more " * 20)
    assert session.get_context_block("memory").content == "short fact"
    assert ContextBlockRecord.objects.get(label=f"memory_{session.session_id}").content == "short fact"
    exact = "x" * 40  # 10 tokens exactly
    assert session.replace_context_block("memory", exact).tokens == 10


def test_readonly_writes_refused(session):
    session.with_context("soul", provider=StaticProvider("fixed"))
    with pytest.raises(ContextReadOnly):
        session.replace_context_block("soul", "changed")
    with pytest.raises(ContextReadOnly):
        session.append_context_block("soul", "more")
    assert session.get_context_block("soul").content == "fixed"


def test_keyed_blocks_refuse_plain_writes(session):
    session.with_context("kb", provider=AsyncSearch())
    with pytest.raises(ContextReadOnly, match="keyed"):
        session.replace_context_block("kb", "x")


def test_unknown_label_and_bad_content(session):
    session.with_context("memory")
    with pytest.raises(KeyError):
        session.replace_context_block("nope", "x")
    with pytest.raises(TypeError):
        session.replace_context_block("memory", 42)


def test_provider_failure_leaves_block_unchanged(session):
    session.with_context("f", provider=Failing())
    with pytest.raises(OSError, match="disk on fire"):
        session.replace_context_block("f", "y")
    assert session.get_context_block("f").content == "x"


@pytest.mark.parametrize(
    ("initial", "addition", "expected"),
    [
        ("", "first", "first"),
        ("a", "b", "a\nb"),
        ("a", "\nb", "a\nb"),
        ("a\n", "b", "a\n\nb"),
    ],
)
def test_append_separator_rule(session, initial, addition, expected):
    session.with_context("memory")
    if initial:
        session.replace_context_block("memory", initial)
    assert session.append_context_block("memory", addition).content == expected
    assert ContextBlockRecord.objects.get(label=f"memory_{session.session_id}").content == expected


# ── runtime add / remove ────────────────────────────────────────────
def test_add_and_remove_context_at_runtime(session):
    session.with_context("memory")
    session.get_context_blocks()
    block = session.add_context("ext", description="From extension X", max_tokens=500)
    assert (block.label, block.description, block.max_tokens, block.writable) == ("ext", "From extension X", 500, True)
    session.replace_context_block("ext", "note")
    assert ContextBlockRecord.objects.get(label=f"ext_{session.session_id}").content == "note"
    assert [b.label for b in session.get_context_blocks()] == ["memory", "ext"]
    with pytest.raises(ValueError, match='Context block "ext" already exists'):
        session.add_context("ext")
    assert session.remove_context("ext") is True
    assert session.remove_context("ext") is False
    assert [b.label for b in session.get_context_blocks()] == ["memory"]
    assert session.add_context("ro", provider=StaticProvider("static")).writable is False


def test_add_context_before_first_use(session):
    block = session.add_context("late", provider=StaticProvider("v"))
    assert block.content == "v"
    assert [b.label for b in session.get_context_blocks()] == ["late"]


def test_duplicate_labels_and_bad_limits_rejected(session):
    session.with_context("a")
    with pytest.raises(ValueError, match='Context block "a" already exists'):
        session.with_context("a")
    with pytest.raises(ValueError, match="max_tokens must be a positive integer or None"):
        session.with_context("b", max_tokens=0)
    with pytest.raises(ValueError, match="context label must be a non-empty string"):
        session.with_context("")


# ── wiring ──────────────────────────────────────────────────────────
def test_auto_wiring_keys_with_and_without_session_id(db):
    plain = Session.create().with_context("memory")
    plain.replace_context_block("memory", "global")
    named = Session.create().for_session("chat-42").with_context("memory")
    named.replace_context_block("memory", "namespaced")
    rows = dict(ContextBlockRecord.objects.values_list("label", "content"))
    assert rows == {"memory": "global", "memory_chat-42": "namespaced"}


def test_builder_order_does_not_matter(db):
    first = Session.create().with_context("memory").for_session("late-id")
    first.replace_context_block("memory", "v")
    assert ContextBlockRecord.objects.filter(label="memory_late-id").exists()
    assert not ContextBlockRecord.objects.filter(label="memory").exists()


def test_two_sessions_from_the_same_builder_never_share_memory_or_prompt(db):
    def build(session_id):
        return (
            Session.create()
            .for_session(session_id)
            .with_context("soul", provider=StaticProvider("You are helpful."))
            .with_context("memory", description="Learned facts", max_tokens=100)
            .with_cached_prompt()
        )

    alice, bob = build("alice"), build("bob")
    alice.replace_context_block("memory", "Alice likes tea.")
    assert bob.get_context_block("memory").content == ""
    alice_prompt = alice.freeze_system_prompt()
    bob_prompt = bob.freeze_system_prompt()
    assert "Alice likes tea." in alice_prompt
    assert "Alice" not in bob_prompt
    bob.replace_context_block("memory", "Bob likes coffee.")
    assert build("alice").get_context_block("memory").content == "Alice likes tea."
    assert build("alice").freeze_system_prompt() == alice_prompt
    assert build("bob").get_context_block("memory").content == "Bob likes coffee."
    labels = set(ContextBlockRecord.objects.values_list("label", flat=True))
    assert labels == {"memory_alice", "memory_bob", "_system_prompt_alice", "_system_prompt_bob"}


def test_explicit_provider_is_used_as_given(session):
    provider = DjangoContextProvider("shared-notes")
    session.with_context("notes", provider=provider)
    session.replace_context_block("notes", "x")
    assert ContextBlockRecord.objects.get(label="shared-notes").content == "x"


class Plain:
    """A minimal custom SessionProvider (delegates to the ORM, but is not it)."""

    def __init__(self, session_id):
        self._inner = DjangoSessionProvider(session_id)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_custom_storage_skips_auto_wiring(session_id):
    custom = Session.create(Plain(session_id)).with_context("memory").with_cached_prompt()
    block = custom.get_context_block("memory")
    assert (block.content, block.writable) == ("", False)
    with pytest.raises(ContextReadOnly):
        custom.replace_context_block("memory", "x")
    with pytest.raises(ValueError, match='Context block "other" needs a provider'):
        custom.add_context("other")
    assert custom.add_context("other", provider=Memory("ok")).content == "ok"
    custom.freeze_system_prompt()
    assert not ContextBlockRecord.objects.exists()


def test_direct_construction_with_context_configs(session_id):
    provider = Memory("facts")
    session = Session(
        DjangoSessionProvider(session_id),
        context=[ContextConfig("memory", "Notes", 500, provider), ContextConfig("soul", provider=StaticProvider("S"))],
    )
    assert [(b.label, b.description, b.max_tokens) for b in session.get_context_blocks()] == [
        ("memory", "Notes", 500),
        ("soul", None, None),
    ]
    assert session.replace_context_block("memory", "new").content == "new"
    assert provider.content == "new"


# ── async twins ─────────────────────────────────────────────────────
# Async twins run in Django's sync thread, which has its own connection.
@pytest.mark.django_db(transaction=True)
def test_async_twins_with_async_providers(session):
    provider = AsyncMemory("")
    session.with_context("mem", provider=provider, max_tokens=50)

    async def run():
        await session.areplace_context_block("mem", "a")
        block = await session.aappend_context_block("mem", "b")
        blocks = await session.aget_context_blocks()
        added = await session.aadd_context("x", provider=StaticProvider("s"))
        removed = await session.aremove_context("x")
        return block, blocks, added, removed, await session.aget_context_block("mem")

    block, blocks, added, removed, again = asyncio.run(run())
    assert block.content == "a\nb"
    assert provider.content == "a\nb"
    assert provider.inits == ["mem"]
    assert [b.label for b in blocks] == ["mem"]
    assert added.content == "s"
    assert removed is True
    assert again.content == "a\nb"
