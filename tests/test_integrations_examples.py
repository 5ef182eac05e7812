"""The examples/ agent loops run offline: as modules (their own SQLite file) and in-process on the test database."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from agent_sessions import Session

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
LOOPS = ["openai_agents_loop", "langchain_loop", "pydantic_ai_loop"]
EXPECTED = {
    "openai_agents_loop": ["The forecast says: rain, 18 °C.", "The forecast says: sunny, 21 °C."],
    "langchain_loop": ["Kyoto: see the forecast above.", "Osaka: see the forecast above."],
    "pydantic_ai_loop": ["The forecast says: rain, 18 °C.", "The forecast says: sunny, 21 °C."],
}


ROOT = EXAMPLES.parent
# Every example, run the one documented way: ``python -m examples.<name>`` from the repository root.
SCRIPT_OUTPUT = {
    **{name: EXPECTED[name] for name in LOOPS},
    "openai_chat_loop": ["assistant: Here you go: Sunny, 21 °C in Kyoto."],
    "anthropic_loop": ["assistant: Here you go: Sunny, 21 °C in Kyoto."],
}


def repository_state() -> str:
    """What git sees in the folders an example could write to (ignored files included)."""
    paths = ["examples", "project", "db.sqlite3", "media", "staticfiles"]
    done = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "--", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.mark.parametrize("name", sorted(SCRIPT_OUTPUT))
def test_example_runs_as_a_module_and_writes_nothing_into_the_repository(name, tmp_path):
    """Offline (a fake model), on a database of its own in the temporary directory."""
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")}
    env.update(PYTHONUTF8="1", PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(tmp_path))
    before = repository_state()
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-m", f"examples.{name}"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for answer in SCRIPT_OUTPUT[name]:
        assert answer in done.stdout
    assert f"(database: {tmp_path}" in done.stdout
    assert list(tmp_path.glob("agent-sessions-example-*/example.sqlite3"))
    assert repository_state() == before


@pytest.mark.django_db(transaction=True)  # the Agents SDK loop writes from Django's sync thread
@pytest.mark.parametrize("name", LOOPS)
def test_example_main_stores_a_searchable_session(name):
    namespace = runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name=f"example_{name}")
    session_id = f"ex-{name}"
    assert namespace["main"](session_id) == EXPECTED[name]
    session = Session.create().for_session(session_id)
    assert session.search("Osaka")
    tool_rows = [m for m in session.get_history() if any("toolCallId" in p for p in m["parts"])]
    assert len(tool_rows) >= 4  # two calls and their two results
