"""The README's quick start runs as written: its ```python blocks are executed, in order, verbatim."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


PROJECT_FILE = re.compile(r"# ([\w/]+\.py)\n")


def quick_start_blocks() -> list[str]:
    """The ```python blocks between the "## Quick start" heading and the next "## " heading that are code to
    run; a block headed ``# <path>.py`` is a file of the reader's project (scripts/wheel_check.py applies those)."""
    text = README.read_text(encoding="utf-8")
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "README.md has no '## Quick start' section"
    blocks = re.findall(r"^```python\n(.*?)^```", section.group(1), re.S | re.M)
    return [block for block in blocks if not PROJECT_FILE.match(block)]


def test_readme_keeps_two_commands_first():
    headings = re.findall(r"^## (.+)$", README.read_text(encoding="utf-8"), re.M)
    assert headings[:2] == ["Two commands", "Quick start"]


@pytest.mark.django_db
def test_quick_start_runs_verbatim():
    blocks = quick_start_blocks()
    assert len(blocks) >= 3
    namespace: dict = {"__name__": "readme_quick_start"}
    for block in blocks:
        exec(compile(block, f"{README.name} (quick start)", "exec"), namespace)  # noqa: S102

    request = namespace["request"]
    system, user = request["messages"]
    assert system["role"] == "system"
    assert "You are a helpful assistant." in system["content"]
    assert "MEMORY (Learned facts about the user)" in system["content"]
    assert user == {"role": "user", "content": "Hi, I'm Ada."}
    names = [t["function"]["name"] for t in request["tools"]]
    assert "set_context" in names
    assert all(t["type"] == "function" for t in request["tools"])
    session = namespace["session"]
    assert session.get_context_block("memory").content == "The user's name is Ada."
    for block in blocks:  # run twice on the same database, as a reader re-running the shell session does
        exec(compile(block, f"{README.name} (quick start, again)", "exec"), namespace)  # noqa: S102
    assert [m["id"] for m in session.get_history()] == ["u1", "a1b"]
    anthropic_request = namespace["anthropic_request"]
    assert "You are a helpful assistant." in anthropic_request["system"]
    assert anthropic_request["messages"][0] == {"role": "user", "content": [{"type": "text", "text": "Hi, I'm Ada."}]}


class FakeChatCompletions:
    """``client.chat.completions.create``: calls get_weather once, then answers with its result."""

    def __init__(self) -> None:
        self.requests: list[dict] = []

    def create(self, **request):
        from openai.types.chat import ChatCompletion

        self.requests.append(request)
        last = request["messages"][-1]
        if last["role"] == "tool":
            message = {"role": "assistant", "content": f"It is {last['content']}."}
        else:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{len(self.requests)}",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Kyoto"}'},
                    }
                ],
            }
        return ChatCompletion.model_validate(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            }
        )


@pytest.mark.django_db
def test_quick_start_agent_turn_runs_the_tool_loop():
    namespace: dict = {"__name__": "readme_quick_start"}
    for block in quick_start_blocks():
        exec(compile(block, f"{README.name} (quick start)", "exec"), namespace)  # noqa: S102
    client = type("Client", (), {})()
    client.chat = type("Chat", (), {})()
    client.chat.completions = FakeChatCompletions()
    session = namespace["build_session"]("chat-7")
    question = {"id": "q1", "role": "user", "parts": [{"type": "text", "text": "Weather in Kyoto?"}]}
    reply = namespace["agent_turn"](session, client, question)
    assert reply["parts"] == [{"type": "text", "text": "It is Sunny in Kyoto."}]
    history = session.get_history()
    assert [m["role"] for m in history] == ["user", "assistant", "assistant"]
    assert history[1]["parts"][0]["state"] == "output-available"
    assert history[1]["parts"][0]["output"] == "Sunny in Kyoto"
    second = client.chat.completions.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]


def test_settings_reference_matches_conf_defaults():
    """docs/settings.md lists every AGENT_SESSIONS_* key of conf.DEFAULTS with the code's default."""
    from agent_sessions import conf

    text = (README.parent / "docs" / "settings.md").read_text(encoding="utf-8")
    app_table = text.split("## Settings of the demo project")[0]
    rows = dict(re.findall(r"^\| `AGENT_SESSIONS_(\w+)` \| `([^`]*)` \|", app_table, re.M))
    missing = sorted(set(conf.DEFAULTS) - set(rows))
    assert not missing, f"add to docs/settings.md: {', '.join('AGENT_SESSIONS_' + k for k in missing)}"
    assert not set(rows) - set(conf.DEFAULTS), "docs/settings.md documents settings the code does not have"
    assert {key: rows[key] for key in conf.DEFAULTS} == {key: repr(value) for key, value in conf.DEFAULTS.items()}


def test_docs_are_linked_from_the_readme():
    text = README.read_text(encoding="utf-8")
    for page in ("settings", "api", "data-model", "operations", "scaling"):
        assert f"(docs/{page}.md)" in text
        assert (README.parent / "docs" / f"{page}.md").exists()
    assert "/api/docs" in (README.parent / "docs" / "api.md").read_text(encoding="utf-8")


def demo_settings_defaults() -> dict[str, object]:
    """``{variable: default}`` of every environment variable project/settings.py reads by a literal name:
    ``os.environ.get(NAME, default)`` and ``env_bool(NAME, default)`` (``...`` when the default is an expression)."""
    import ast

    tree = ast.parse((README.parent / "project" / "settings.py").read_text(encoding="utf-8"))
    found: dict[str, object] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        func = ast.unparse(node.func)
        if func in ("os.environ.get", "env_bool") and isinstance(node.args[0].value, str):
            default = node.args[1] if len(node.args) > 1 else None
            found[node.args[0].value] = default.value if isinstance(default, ast.Constant) else ...
    return found


def test_demo_settings_reference_matches_the_projects_defaults():
    """docs/settings.md's demo table lists every variable project/settings.py reads, with the code's default."""
    text = (README.parent / "docs" / "settings.md").read_text(encoding="utf-8")
    demo_table = text.split("## Settings of the demo project")[1]
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]*) \|", demo_table, re.M))
    code = demo_settings_defaults()
    assert {"DJANGO_HSTS_SECONDS", "DJANGO_DEBUG", "CELERY_BROKER_URL"} <= set(code)
    missing = sorted(set(code) - set(rows))
    assert not missing, f"add to docs/settings.md's demo table: {', '.join(missing)}"
    for name, default in code.items():
        documented = re.match(r"`([^`]*)`", rows[name].strip())
        if default is ... or default is None:
            continue  # an expression or no default: the cell explains it in words
        if default == "":
            assert rows[name].strip() in ("empty", "``"), f"{name}: the code's default is empty"
            continue
        expected = str(default).lower() if isinstance(default, bool) else str(default)
        assert documented, f"{name}: the code's default is {expected!r}; docs/settings.md gives none"
        assert documented.group(1) == expected, (
            f"{name}: docs/settings.md says {documented.group(1)!r}, code {expected!r}"
        )


def project_file_blocks() -> dict[str, str]:
    """``{path: block}`` of the quick start's ```python blocks headed ``# <path>.py`` (the reader's project files)."""
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", README.read_text(encoding="utf-8"), re.S | re.M)
    blocks = re.findall(r"^```python\n(.*?)^```", section.group(1), re.S | re.M)
    return {match.group(1): block for block in blocks if (match := PROJECT_FILE.match(block))}


@pytest.mark.django_db
def test_the_readme_sessions_module_registers_a_configuration_a_worker_can_rebuild():
    from agent_sessions import registry

    files = project_file_blocks()
    assert set(files) == {"mysite/settings.py", "mysite/urls.py", "mysite/__init__.py", "myapp/sessions.py"}
    try:
        exec(compile(files["myapp/sessions.py"], "README.md (myapp/sessions.py)", "exec"), {})  # noqa: S102
        session = registry.get("support").get_session("chat-1")
        assert session.config_name == "support"
    finally:
        registry.unregister("support")
