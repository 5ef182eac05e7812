"""Refinements of the generated OpenAPI document: exact optional bodies, links between operations, and
the NUL rule inside tool arguments (any JSON, but no NUL in a string or key: Postgres TEXT cannot hold one).

Links tell clients (and schemathesis' stateful phase) where the ids a response
returns can be used next: a created session's id in every ``{session_id}``, an
appended message's id in ``{message_id}``, ``at_message_id`` and compaction
ranges, a stored compaction's id in ``{compaction_id}``, a listed block's label
in ``{label}``.  See https://spec.openapis.org/oas/v3.1.0#link-object.
"""

from __future__ import annotations

from typing import Any

from .schemas import NO_NUL_PATTERN

SESSION = "/sessions/{session_id}"
MESSAGE = SESSION + "/messages/{message_id}"
COMPACTION = SESSION + "/compactions/{compaction_id}"
BLOCK = SESSION + "/context/{label}"

_SAME_SESSION = {"session_id": "$request.path.session_id"}
_NEW_SESSION = {"session_id": "$response.body#/id"}
_MESSAGE = {**_SAME_SESSION, "message_id": "$response.body#/id"}

# (method, path, status) → {link name: (target method, target path, parameters, request body or None)}
LINKS: dict[tuple[str, str, str], dict[str, tuple[str, str, dict, Any]]] = {
    ("post", "/sessions", "201"): {
        "GetSession": ("get", SESSION, _NEW_SESSION, None),
        # A new root: a generated parent_id names no stored message (404), and the chain would stop there.
        "AppendMessage": ("post", SESSION + "/messages", _NEW_SESSION, {"parent_id": None}),
        "History": ("get", SESSION + "/history", _NEW_SESSION, None),
        "RequestCompaction": ("post", SESSION + "/compaction-requests", _NEW_SESSION, None),
        "ListContext": ("get", SESSION + "/context", _NEW_SESSION, None),
        "RenameSession": ("patch", SESSION, _NEW_SESSION, None),
        "DeleteSession": ("delete", SESSION, _NEW_SESSION, None),
    },
    ("post", SESSION + "/messages", "201"): {
        "AppendChild": ("post", SESSION + "/messages", _SAME_SESSION, {"parent_id": "$response.body#/id"}),
        "GetMessage": ("get", MESSAGE, _MESSAGE, None),
        "PutMessage": ("put", MESSAGE, _MESSAGE, None),
        "DeleteMessage": ("delete", MESSAGE, _MESSAGE, None),
        "Fork": ("post", SESSION + "/forks", _SAME_SESSION, {"at_message_id": "$response.body#/id"}),
        "ForkDeprecated": ("post", SESSION + "/fork", _SAME_SESSION, {"at_message_id": "$response.body#/id"}),
        "Compaction": (
            "post",
            SESSION + "/compactions",
            _SAME_SESSION,
            {"summary": "summary", "from_message_id": "$response.body#/id", "to_message_id": "$response.body#/id"},
        ),
        "Branches": ("get", SESSION + "/branches", {**_SAME_SESSION, "message_id": "$response.body#/id"}, None),
        "CompactAtLeaf": (
            "post",
            SESSION + "/compaction-requests",
            _SAME_SESSION,
            {"leaf_id": "$response.body#/id"},
        ),
    },
    # History names stored messages too, so a scenario that reads it can fork or compact with real ids.
    ("get", SESSION + "/history", "200"): {
        "ForkAtFirst": ("post", SESSION + "/forks", _SAME_SESSION, {"at_message_id": "$response.body#/messages/0/id"}),
        "CompactFirst": (
            "post",
            SESSION + "/compactions",
            _SAME_SESSION,
            {
                "summary": "summary",
                "from_message_id": "$response.body#/messages/0/id",
                "to_message_id": "$response.body#/messages/0/id",
            },
        ),
    },
    ("post", SESSION + "/forks", "201"): {
        "GetFork": ("get", SESSION, _NEW_SESSION, None),
        "ForkMapping": ("get", SESSION + "/fork-mapping", _NEW_SESSION, None),
    },
    ("post", SESSION + "/split", "201"): {
        "GetContinuation": ("get", SESSION, _NEW_SESSION, None),
    },
    ("post", SESSION + "/compactions", "201"): {
        "GetCompaction": ("get", COMPACTION, {**_SAME_SESSION, "compaction_id": "$response.body#/id"}, None),
        "DeleteCompaction": ("delete", COMPACTION, {**_SAME_SESSION, "compaction_id": "$response.body#/id"}, None),
    },
    ("post", SESSION + "/compaction-requests", "202"): {
        "CompactionStatus": ("get", SESSION + "/compaction-status", _SAME_SESSION, None),
    },
    ("get", SESSION + "/context", "200"): {
        "GetBlock": ("get", BLOCK, {**_SAME_SESSION, "label": "$response.body#/blocks/0/label"}, None),
        "ReplaceBlock": ("put", BLOCK, {**_SAME_SESSION, "label": "$response.body#/blocks/0/label"}, None),
        "AppendBlock": ("post", BLOCK + "/append", {**_SAME_SESSION, "label": "$response.body#/blocks/0/label"}, None),
    },
}


NUL_FREE_JSON = "NulFreeJson"
_NO_NUL = {"pattern": NO_NUL_PATTERN}
_NUL_FREE_REF = {"$ref": f"#/components/schemas/{NUL_FREE_JSON}"}
NUL_FREE_JSON_SCHEMA: dict[str, Any] = {
    "description": "Any JSON value whose strings and object keys hold no NUL character.",
    "anyOf": [
        {"type": "string", **_NO_NUL},
        {"type": ["number", "boolean", "null"]},
        {"type": "array", "items": _NUL_FREE_REF},
        {"type": "object", "propertyNames": _NO_NUL, "additionalProperties": _NUL_FREE_REF},
    ],
}


def _nul_free_tool_arguments(components: dict) -> None:
    """Tool arguments are an object of NUL-free JSON (pydantic only knows ``dict[str, Any]``)."""
    components[NUL_FREE_JSON] = NUL_FREE_JSON_SCHEMA
    arguments = components.get("ToolCallIn", {}).get("properties", {}).get("arguments")
    if arguments is not None:
        arguments.update(propertyNames=_NO_NUL, additionalProperties=_NUL_FREE_REF)


def _operation_ids(paths: dict, prefix: str) -> dict[tuple[str, str], str]:
    return {
        (method, path.removeprefix(prefix)): op["operationId"]
        for path, operations in paths.items()
        for method, op in operations.items()
        if "operationId" in op
    }


def _drop_null_body(operation: dict) -> None:
    """An optional body is omitted, never ``null`` (the API rejects a JSON null body)."""
    for media in operation.get("requestBody", {}).get("content", {}).values():
        alternatives = media.get("schema", {}).get("anyOf")
        if alternatives:
            kept = [a for a in alternatives if a != {"type": "null"}]
            media["schema"] = kept[0] if len(kept) == 1 else {"anyOf": kept}


def refine(schema: dict) -> dict:
    """Apply the refinements to a generated document in place (its paths carry the mount prefix, e.g. ``/api``)."""
    _nul_free_tool_arguments(schema.setdefault("components", {}).setdefault("schemas", {}))
    paths = schema.get("paths", {})
    prefix = min((p.removesuffix("/sessions") for p in paths if p.endswith("/sessions")), key=len, default="")
    ids = _operation_ids(paths, prefix)
    for operations in paths.values():
        for operation in operations.values():
            _drop_null_body(operation)
    for (method, path, status), links in LINKS.items():
        response = paths.get(prefix + path, {}).get(method, {}).get("responses", {})
        target = response.get(status, response.get(int(status)))
        if target is None:
            continue
        target["links"] = {
            name: {
                "operationId": ids[(to_method, to_path)],
                "parameters": parameters,
                **({"requestBody": body} if body is not None else {}),
            }
            for name, (to_method, to_path, parameters, body) in links.items()
            if (to_method, to_path) in ids
        }
    return schema
