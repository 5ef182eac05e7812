"""Fork and compact_and_split carry the session's context over.

A forked agent keeps its memory, its searchable entries, its loaded skills (they live
in the copied transcript) and its frozen prompt; a split continuation keeps memory and
entries and renders a fresh prompt from them.
"""

from __future__ import annotations

import pytest
from django.core.files.storage import FileSystemStorage

from agent_sessions import DjangoSearchProvider, SessionManager, StorageSkillProvider
from agent_sessions.models import ContextBlockRecord, SearchEntry
from tests.conftest import msg, tool_msg

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def skills(tmp_path):
    provider = StorageSkillProvider(FileSystemStorage(location=str(tmp_path)), prefix="skills/")
    provider.set("guide", "# Guide\nStep one.")
    return provider


@pytest.fixture
def manager(skills):
    return (
        SessionManager()
        .with_context("memory", description="Learned facts", max_tokens=200)
        .with_context("skills", provider=skills)
        .with_cached_prompt()
    )


def learned_session(manager):
    """A session that wrote memory after freezing its prompt, indexed an entry and loaded a skill."""
    sid = manager.create("source").id
    session = manager.get_session(sid)
    session.replace_context_block("memory", "User is Ada.")
    frozen = session.freeze_system_prompt()
    manager.append(sid, msg("u1", text="load the guide"))
    document = session.tools()["load_context"].execute(label="skills", key="guide")
    manager.append(sid, tool_msg("a1", "load_context", "c1", {"label": "skills", "key": "guide"}, document))
    session.tools()["set_context"].execute(label="memory", content="Likes green tea.", mode="append")
    DjangoSearchProvider(label=f"kb_{sid}").set("tea", "Ada drinks green tea every morning")
    return sid, frozen


def test_fork_copies_blocks_entries_prompt_and_loaded_skills(manager):
    sid, frozen = learned_session(manager)
    fork = manager.fork(sid, "a1", "fork")
    forked = manager.get_session(fork.id)
    assert forked.get_context_block("memory").content == "User is Ada.\nLikes green tea."
    assert forked.freeze_system_prompt() == frozen  # byte-identical, not re-rendered
    assert "Likes green tea" not in frozen
    assert forked.get_loaded_skill_keys() == {"skills:guide"}
    assert DjangoSearchProvider(label=f"kb_{fork.id}").search("green tea") == [
        {"key": "tea", "content": "Ada drinks green tea every morning"}
    ]
    # The source is untouched, and the two sessions no longer share rows.
    forked.replace_context_block("memory", "fork only")
    assert manager.get_session(sid).get_context_block("memory").content == "User is Ada.\nLikes green tea."


def test_compact_and_split_copies_blocks_and_renders_a_new_prompt(manager):
    sid, frozen = learned_session(manager)
    new = manager.compact_and_split(sid, "Ada asked for the guide.")
    continued = manager.get_session(new.id)
    assert continued.get_context_block("memory").content == "User is Ada.\nLikes green tea."
    assert not ContextBlockRecord.objects.filter(label=f"_system_prompt_{new.id}").exists()
    prompt = continued.freeze_system_prompt()
    assert "User is Ada.\nLikes green tea." in prompt
    assert prompt != frozen
    assert continued.get_loaded_skill_keys() == set()  # the load is in the old transcript only
    assert SearchEntry.objects.filter(label=f"kb_{new.id}", key="tea").exists()
    assert DjangoSearchProvider(label=f"kb_{new.id}").search("morning")[0]["key"] == "tea"


def test_fork_of_a_session_without_context_copies_nothing_extra(manager):
    sid = manager.create("bare").id
    manager.append(sid, msg("u1"))
    before = ContextBlockRecord.objects.count(), SearchEntry.objects.count()
    fork = manager.fork(sid, "u1", "fork")
    assert (ContextBlockRecord.objects.count(), SearchEntry.objects.count()) == before
    assert [m["parts"] for m in manager.get_history(fork.id)] == [msg("u1")["parts"]]
