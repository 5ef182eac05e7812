"""The OpenAPI links schemathesis' stateful phase follows: every one resolves, none is lost in serialisation,
and the fork and single-compaction routes are reached with ids a response returned (not generated ones)."""

from __future__ import annotations

import json

from agent_sessions.api.main import api as ninja_api
from agent_sessions.api.openapi import LINKS


def _served() -> dict:
    """The document as clients read it: JSON text, duplicate keys reported instead of silently merged."""

    def no_duplicates(pairs: list[tuple[str, object]]) -> dict:
        keys = [key for key, _ in pairs]
        assert len(keys) == len(set(keys)), f"duplicate keys {sorted({k for k in keys if keys.count(k) > 1})}"
        return dict(pairs)

    return json.loads(json.dumps(ninja_api.get_openapi_schema()), object_pairs_hook=no_duplicates)


def _incoming(schema: dict) -> dict[str, list[tuple[str, dict]]]:
    """operationId → [(link name, link)] of the links that lead to it."""
    found: dict[str, list[tuple[str, dict]]] = {}
    for operations in schema["paths"].values():
        for operation in operations.values():
            for response in operation["responses"].values():
                for name, link in response.get("links", {}).items():
                    found.setdefault(link["operationId"], []).append((name, link))
    return found


def test_each_response_status_appears_once_with_its_schema_and_links():
    """A route's own ``openapi_extra`` must not add a second "201" (links only) beside ninja's: the served
    JSON would then have two "201" keys, and lose the fork's created-session schema or its links."""
    fork = _served()["paths"]["/api/sessions/{session_id}/forks"]["post"]["responses"]["201"]
    assert fork["content"]["application/json"]["schema"]["$ref"].endswith("/SessionOut")
    assert set(fork["links"]) == {"GetFork", "ForkMapping"}


def test_every_declared_link_is_in_the_document():
    schema = _served()
    documented = sum(len(r.get("links", {})) for ops in schema["paths"].values() for op in ops.values()
                     for r in op["responses"].values())  # fmt: skip
    assert documented == sum(len(links) for links in LINKS.values())


def test_fork_and_single_compactions_are_reached_with_returned_ids():
    incoming = _incoming(_served())
    prefix = "agent_sessions_api_routes_"
    fork_links = dict(incoming[prefix + "sessions_create_fork"])
    assert fork_links["Fork"]["requestBody"] == {"at_message_id": "$response.body#/id"}
    assert fork_links["ForkAtFirst"]["requestBody"] == {"at_message_id": "$response.body#/messages/0/id"}
    for target in ("compaction_get_compaction", "compaction_delete_compaction"):
        (link,) = [link for _, link in incoming[prefix + target]]
        assert link["parameters"]["compaction_id"] == "$response.body#/id"
    # The first message of a new session is a root: a generated parent_id would be a 404 that ends the chain.
    append = dict(incoming[prefix + "messages_append_message"])
    assert append["AppendMessage"]["requestBody"] == {"parent_id": None}
    assert append["AppendChild"]["requestBody"] == {"parent_id": "$response.body#/id"}
