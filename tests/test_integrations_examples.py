"""The examples/ agent loops run offline: as scripts (fresh SQLite file) and in-process on the test database."""

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


@pytest.fixture(scope="module")
def script_dir(tmp_path_factory) -> Path:
    """One SQLite file for all script runs: only the first one pays for the migrations."""
    return tmp_path_factory.mktemp("examples")


@pytest.mark.parametrize("name", LOOPS)
def test_example_runs_as_a_script(name, script_dir):
    tmp_path = script_dir
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "PYTHONUTF8": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for answer in EXPECTED[name]:
        assert answer in done.stdout


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
