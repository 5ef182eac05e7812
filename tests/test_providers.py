"""Built-in context providers: static text, context-block rows, search entries and storage-backed skills."""

from __future__ import annotations

import pytest
from django.core.files.storage import FileSystemStorage, InMemoryStorage

from agent_sessions import DjangoContextProvider, DjangoSearchProvider, StaticProvider, StorageSkillProvider
from agent_sessions.models import ContextBlockRecord, SearchEntry

pytestmark = pytest.mark.django_db


# ── StaticProvider ──────────────────────────────────────────────────
def test_static_provider_returns_its_text():
    assert StaticProvider("You are helpful.").get() == "You are helpful."


# ── DjangoContextProvider ───────────────────────────────────────────
def test_context_provider_none_until_stored_then_empty_is_distinct():
    provider = DjangoContextProvider("k1")
    assert provider.get() is None
    provider.set("")
    assert provider.get() == ""
    provider.set("hello")
    provider.set("hello again")
    assert provider.get() == "hello again"
    assert ContextBlockRecord.objects.filter(label="k1").count() == 1


def test_context_provider_adopts_label_from_init_but_keeps_explicit_key():
    implicit = DjangoContextProvider()
    implicit.init("memory")
    implicit.set("x")
    explicit = DjangoContextProvider("mine")
    explicit.init("memory2")
    explicit.set("y")
    assert dict(ContextBlockRecord.objects.values_list("label", "content")) == {"memory": "x", "mine": "y"}
    with pytest.raises(ValueError, match="DjangoContextProvider has no key"):
        DjangoContextProvider().get()


def test_context_provider_set_bumps_updated_at_and_delete():
    provider = DjangoContextProvider("k")
    provider.set("a")
    first = ContextBlockRecord.objects.get(label="k").updated_at
    provider.set("b")
    assert ContextBlockRecord.objects.get(label="k").updated_at >= first
    assert provider.delete() is True
    assert provider.get() is None
    assert provider.delete() is False


# ── DjangoSearchProvider ────────────────────────────────────────────
def _search(label: str = "knowledge") -> DjangoSearchProvider:
    provider = DjangoSearchProvider()
    provider.init(label)
    return provider


def test_search_provider_indexes_ands_and_ranks():
    kb = _search()
    kb.set("deploy", "We deploy the database on Friday")
    kb.set("holiday", "Friday is a holiday")
    kb.set("heavy", "deploy deploy deploy on Friday, deploy again")
    hits = kb.search("deploy Friday")
    assert [h["key"] for h in hits] == ["heavy", "deploy"]
    assert hits[1]["content"] == "We deploy the database on Friday"
    assert kb.search("nothing matches this") == []


def test_search_provider_update_reindexes_and_counts():
    kb = _search()
    assert kb.get() == ""
    kb.set("a", "apples are red")
    kb.set("a", "bananas are yellow")
    assert kb.search("apples") == []
    assert [h["key"] for h in kb.search("bananas")] == ["a"]
    assert SearchEntry.objects.filter(label="knowledge").count() == 1
    kb.set("b", "cherries")
    assert kb.get() == "2 entries indexed. Use search_context to find them."
    assert kb.delete("a") is True
    assert kb.search("bananas") == []


def test_search_provider_labels_are_isolated():
    one, two = _search("one"), _search("two")
    one.set("k", "shared word zebra")
    two.set("k", "shared word zebra too")
    assert [h["content"] for h in one.search("zebra")] == ["shared word zebra"]
    assert SearchEntry.objects.count() == 2


@pytest.mark.parametrize("query", ["", "   ", '"', "AND", "NEAR(", "*", "-x", "a & b | !c", "'; DROP TABLE x; --"])
def test_search_provider_hostile_queries_never_raise(query):
    kb = _search()
    kb.set("k", "some text and more")
    kb.set("other", "hostile tokens AND NEAR quoted")
    hits = kb.search(query)
    assert isinstance(hits, list)
    assert {h["key"] for h in hits} <= {"k", "other"}
    assert [h["key"] for h in kb.search("text more")] == ["k"]  # the index answers real queries alongside


def test_search_provider_limit_and_unlabelled_use():
    kb = _search()
    for i in range(15):
        kb.set(f"k{i}", "needle in a haystack")
    assert len(kb.search("needle")) == 10
    assert len(kb.search("needle", limit=3)) == 3
    with pytest.raises(ValueError, match="DjangoSearchProvider has no label"):
        DjangoSearchProvider().search("needle")


# ── StorageSkillProvider ────────────────────────────────────────────
@pytest.fixture
def disk(tmp_path):
    return FileSystemStorage(location=str(tmp_path))


def test_skill_provider_lists_loads_and_writes_with_descriptions(disk, tmp_path):
    skills = StorageSkillProvider(disk, prefix="skills/")
    assert skills.get() == ""
    skills.set("api-ref", "# API\nGET /things", "API reference")
    skills.set("guide", "Read me first")
    skills.set("nested/deep", "deep text", "Deep one")
    assert skills.get() == "- api-ref: API reference\n- guide\n- nested/deep: Deep one"
    assert skills.load("api-ref") == "# API\nGET /things"
    assert skills.load("missing") is None
    assert (tmp_path / "skills" / "api-ref").read_text() == "# API\nGET /things"
    assert (tmp_path / "skills" / "api-ref.description").read_text() == "API reference"


def test_skill_provider_overwrites_in_place(disk, tmp_path):
    skills = StorageSkillProvider(disk, prefix="skills/")
    skills.set("a", "one", "first")
    skills.set("a", "two")
    assert skills.load("a") == "two"
    assert sorted(p.name for p in (tmp_path / "skills").iterdir()) == ["a", "a.description"]
    assert skills.get() == "- a: first"
    assert skills.delete("a") is True
    assert skills.get() == ""
    assert skills.delete("a") is False


def test_skill_provider_allow_list(disk):
    StorageSkillProvider(disk).set("secret", "hidden")
    StorageSkillProvider(disk).set("public", "visible", "ok")
    skills = StorageSkillProvider(disk, keys=["public", "absent"])
    assert skills.get() == "- public: ok"
    assert skills.load("secret") is None
    with pytest.raises(ValueError, match="invalid or not allowed skill key: 'secret'"):
        skills.set("secret", "x")


@pytest.mark.parametrize("key", ["", "../etc/passwd", "/abs", "a/../b", "x.description", "a\x00b", "a\\b"])
def test_skill_provider_refuses_unsafe_keys(disk, key):
    skills = StorageSkillProvider(disk, prefix="skills/")
    assert skills.load(key) is None
    with pytest.raises(ValueError, match="invalid or not allowed skill key"):
        skills.set(key, "x")


def test_skill_provider_works_on_any_storage_and_defaults_to_default_storage(settings, tmp_path):
    memory = StorageSkillProvider(InMemoryStorage(), prefix="s/")
    memory.set("k", "from memory", "in RAM")
    assert memory.get() == "- k: in RAM"
    assert memory.load("k") == "from memory"
    settings.MEDIA_ROOT = str(tmp_path)
    default = StorageSkillProvider()
    default.set("x", "on disk")
    assert (tmp_path / "x").read_text() == "on disk"
