"""Property tests: whatever JSON an adapter is handed renders without error and reads back exactly."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_sessions.compaction import sanitize_tool_pairs
from agent_sessions.integrations.openai_agents import item_to_message, message_to_items
from agent_sessions.types import dump_message, text_content, validate_message

FAST = settings(max_examples=100, deadline=None)

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
KINDS = ["message", "function_call", "function_call_output", "reasoning", "web_search_call", "custom_tool_call_output"]
FIELDS = ["role", "content", "call_id", "name", "arguments", "output", "summary", "id", "status"]


@st.composite
def items(draw) -> dict:
    """SDK-like items: a known or odd ``type``, the usual keys with any JSON values, and extras."""
    item: dict = {}
    kind = draw(st.sampled_from([*KINDS, None, "other"]))
    if kind is not None:
        item["type"] = kind
    for key in draw(st.lists(st.sampled_from(FIELDS), unique=True, max_size=6)):
        item[key] = draw(json_values)
    item.update(draw(st.dictionaries(st.text(max_size=6), json_values, max_size=3)))
    return item


@FAST
@given(items())
def test_any_item_is_stored_and_read_back_byte_for_byte(item):
    message = item_to_message(item)
    stored = dump_message(message)  # what the table holds
    assert validate_message(message) == stored
    text_content(message)  # search text never fails
    (back,) = message_to_items(json.loads(stored))
    assert json.dumps(back, ensure_ascii=False) == json.dumps(item, ensure_ascii=False)


@settings(max_examples=40, deadline=None)
@given(st.lists(items(), max_size=6))
def test_rendered_rows_are_valid_for_compaction_helpers(batch):
    names: dict[str, str] = {}
    rows = [item_to_message(item, names) for item in batch]
    sanitize_tool_pairs(rows)  # the pairing helpers accept every rendering
    for row in rows:
        assert row["parts"][-1] == {"type": "data-openai-agents-item", "data": row["parts"][-1]["data"]}
