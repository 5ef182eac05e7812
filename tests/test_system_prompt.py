"""The system prompt: exact format, freeze/refresh, persistence across processes, None vs empty, estimates."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.storage import FileSystemStorage
from django.db import connection

from agent_sessions import (
    DjangoContextProvider,
    DjangoSearchProvider,
    DjangoSessionProvider,
    Session,
    StaticProvider,
    StorageSkillProvider,
)
from agent_sessions.models import ContextBlockRecord
from tests.conftest import msg

pytestmark = pytest.mark.django_db

BAR = "═" * 46


@pytest.fixture
def skills_storage(tmp_path):
    storage = FileSystemStorage(location=str(tmp_path))
    skills = StorageSkillProvider(storage, prefix="skills/")
    skills.set("api-ref", "# API reference", "HTTP endpoints")
    skills.set("guide", "# Guide")
    return storage


def build(session_id: str, skills_storage) -> Session:
    return (
        Session.create()
        .for_session(session_id)
        .with_context("soul", description="Identity", provider=StaticProvider("You are a helpful assistant."))
        .with_context("empty", provider=StaticProvider(""))
        .with_context("memory", description="Learned facts", max_tokens=1100)
        .with_context("scratch")
        .with_context(
            "skills", description="Loadable docs", provider=StorageSkillProvider(skills_storage, prefix="skills/")
        )
        .with_context("knowledge", description="Searchable knowledge base", provider=DjangoSearchProvider())
        .with_cached_prompt()
    )


def test_exact_prompt_for_one_block_of_each_kind(session_id, skills_storage):
    session = build(session_id, skills_storage)
    session.replace_context_block("memory", "User likes coffee.")
    session.append_context_block("memory", "User prefers dark roast.")
    session.set_context_entry("knowledge", "Deploys happen on Fridays.", title="Deploy day")
    assert session.freeze_system_prompt() == (
        f"{BAR}\nSOUL (Identity) [readonly]\n{BAR}\nYou are a helpful assistant.\n\n"
        f"{BAR}\nMEMORY (Learned facts) [1% — 11/1100 tokens] [writable]\n{BAR}\n"
        "User likes coffee.\nUser prefers dark roast.\n\n"
        f"{BAR}\nSCRATCH [writable]\n{BAR}\n\n\n"
        f"{BAR}\nSKILLS (Loadable docs) [loadable]\n{BAR}\n- api-ref: HTTP endpoints\n- guide\n\n"
        f"{BAR}\nKNOWLEDGE (Searchable knowledge base) [searchable]\n{BAR}\n"
        "1 entry indexed. Use search_context to find them."
    )


def test_percentage_header_matches_the_seed_example(session):
    session.with_context("memory", description="Learned facts", max_tokens=1100)
    session.replace_context_block("memory", "x" * (495 * 4))
    assert f"{BAR}\nMEMORY (Learned facts) [45% — 495/1100 tokens] [writable]\n{BAR}\n" in (
        session.freeze_system_prompt()
    )


def test_empty_keyed_blocks_still_render(session):
    class NoSkills:
        def get(self):
            return None

        def load(self, key):
            return None

    session.with_context("skills", provider=NoSkills())
    assert session.freeze_system_prompt() == f"{BAR}\nSKILLS [loadable]\n{BAR}\n"


def test_freeze_persists_and_survives_a_new_process(session_id, skills_storage):
    first = build(session_id, skills_storage)
    first.replace_context_block("memory", "fact one")
    prompt = first.freeze_system_prompt()
    assert ContextBlockRecord.objects.get(label=f"_system_prompt_{session_id}").content == prompt
    first.replace_context_block("memory", "fact two")  # writes do not touch a frozen prompt
    assert first.freeze_system_prompt() == prompt
    fresh = build(session_id, skills_storage)  # a new process: nothing in memory
    assert fresh.freeze_system_prompt() == prompt
    assert "fact two" in fresh.refresh_system_prompt()
    assert build(session_id, skills_storage).freeze_system_prompt() == fresh.freeze_system_prompt()


def test_refresh_rereads_providers(session):
    class Mutable:
        value = "v1"

        def get(self):
            return self.value

    provider = Mutable()
    session.with_context("live", provider=provider).with_cached_prompt()
    assert session.freeze_system_prompt().endswith("v1")
    provider.value = "v2"
    assert session.freeze_system_prompt().endswith("v1")
    assert session.get_context_block("live").content == "v1"
    assert session.refresh_system_prompt().endswith("v2")
    assert session.freeze_system_prompt().endswith("v2")
    assert session.get_context_block("live").content == "v2"


def test_never_stored_is_distinct_from_empty_stored(session):
    session.with_context("soul", provider=StaticProvider("S")).with_cached_prompt()
    ContextBlockRecord.objects.create(label=f"_system_prompt_{session.session_id}", content="")
    assert session.freeze_system_prompt() == ""
    assert session.system_prompt_for_estimate() == ""
    ContextBlockRecord.objects.all().delete()
    assert session.freeze_system_prompt().endswith("S")


def test_prompt_store_keys(db):
    Session.create().with_context("soul", provider=StaticProvider("S")).with_cached_prompt().freeze_system_prompt()
    Session.create().for_session("x").with_cached_prompt().freeze_system_prompt()
    assert set(ContextBlockRecord.objects.values_list("label", flat=True)) == {"_system_prompt", "_system_prompt_x"}


def test_custom_prompt_store_and_memory_only_prompt(session):
    store = DjangoContextProvider("my-prompt")
    session.with_context("soul", provider=StaticProvider("S")).with_cached_prompt(store)
    assert session.freeze_system_prompt() == store.get()
    assert list(ContextBlockRecord.objects.values_list("label", flat=True)) == ["my-prompt"]

    memory_only = Session.create().for_session("m").with_context("soul", provider=StaticProvider("S"))
    prompt = memory_only.freeze_system_prompt()
    assert memory_only.freeze_system_prompt() == prompt
    assert not ContextBlockRecord.objects.filter(label__startswith="_system_prompt").exists()


def test_direct_construction_prompt_store_without_key_gets_namespaced_init(session_id):
    store = DjangoContextProvider()
    session = Session(DjangoSessionProvider(session_id), prompt_store=store)
    session.add_context("soul", provider=StaticProvider("S"))
    session.freeze_system_prompt()
    assert store.key == f"_system_prompt_{session_id}"
    assert store.get().endswith("S")


def test_estimate_does_not_freeze(session):
    session.with_context("soul", provider=StaticProvider("S")).with_cached_prompt()
    rendered = session.system_prompt_for_estimate()
    assert rendered.endswith("S")
    assert not ContextBlockRecord.objects.exists()
    frozen = session.freeze_system_prompt()
    session.add_context("more", provider=StaticProvider("M"))
    assert session.system_prompt_for_estimate() == frozen


def test_clear_messages_refreshes_stored_prompt(session):
    class Mutable:
        value = "before"

        def get(self):
            return self.value

    provider = Mutable()
    session.with_context("live", provider=provider).with_cached_prompt()
    session.append_message(msg("a"))
    session.freeze_system_prompt()
    provider.value = "after"
    session.clear_messages()
    assert session.get_history() == []
    assert session.freeze_system_prompt().endswith("after")


def test_clear_messages_without_a_stored_prompt_stores_nothing(session):
    session.with_context("soul", provider=StaticProvider("S")).with_cached_prompt()
    session.clear_messages()
    assert not ContextBlockRecord.objects.exists()


# Async twins run in Django's sync thread, which has its own connection.
@pytest.mark.django_db(transaction=True)
def test_async_prompt_twins(session):
    session.with_context("soul", provider=StaticProvider("S")).with_cached_prompt()

    async def run():
        return await session.afreeze_system_prompt(), await session.arefresh_system_prompt()

    frozen, refreshed = asyncio.run(run())
    assert frozen == refreshed == f"{BAR}\nSOUL [readonly]\n{BAR}\nS"


_CHILD = """
import sys
from django.conf import settings
settings.DATABASES["default"]["NAME"] = sys.argv[1]
import django
django.setup()
from agent_sessions import Session, StaticProvider
session = (
    Session.create().for_session(sys.argv[2])
    .with_context("soul", provider=StaticProvider("Changed in the child."))
    .with_cached_prompt()
)
sys.stdout.write(session.freeze_system_prompt())
"""


@pytest.mark.django_db(transaction=True)  # the child process must see committed rows
def test_frozen_prompt_survives_a_real_new_process(session_id):
    parent = Session.create().for_session(session_id).with_context("soul", provider=StaticProvider("Original."))
    prompt = parent.with_cached_prompt().freeze_system_prompt()
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": root}
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, connection.settings_dict["NAME"], session_id],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert child.stdout == prompt
    assert prompt.endswith("Original.")
