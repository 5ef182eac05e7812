"""The stored message shape, ``UIMessage``, and its parts as ``TypedDict``s, for editors and type checkers.

They follow the AI SDK's TypeScript ``UIMessage`` (``packages/ai/src/ui/ui-messages.ts``), field for
field, so a message checked here is one the SDK's ``useChat`` reads.  At run time they are plain
dicts: nothing here is enforced (``types.validate_message`` is the run-time check), and a caller
passing any dict keeps working.  Where TypeScript builds a part's ``type`` from a name
(``tool-<name>``, ``data-<name>``) the field is a ``str`` here; the tool states, whose fields differ
per state in TypeScript, are one ``TypedDict`` whose state-specific fields are optional.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

ProviderMetadata = dict[str, dict[str, Any]]
"""Provider-specific data, keyed by provider name."""

UIRole = Literal["system", "user", "assistant"]

ToolState = Literal[
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
]
"""Where a tool call is: its input streaming or complete, awaiting or given approval, its output or error."""


class TextUIPart(TypedDict):
    """Text the model or the user wrote."""

    type: Literal["text"]
    text: str
    state: NotRequired[Literal["streaming", "done"]]
    providerMetadata: NotRequired[ProviderMetadata]


class ReasoningUIPart(TypedDict):
    """The model's reasoning text."""

    type: Literal["reasoning"]
    text: str
    id: NotRequired[str]
    state: NotRequired[Literal["streaming", "done"]]
    providerMetadata: NotRequired[ProviderMetadata]


class CustomContentUIPart(TypedDict):
    """Provider-specific content the SDK passes through (``kind`` reads ``<provider>.<kind>``)."""

    type: Literal["custom"]
    kind: str
    providerMetadata: NotRequired[ProviderMetadata]


class ToolApproval(TypedDict):
    """A tool call's approval request, and the answer once given."""

    id: str
    approved: NotRequired[bool]
    reason: NotRequired[str]
    isAutomatic: NotRequired[bool]
    signature: NotRequired[str]


class ToolUIPart(TypedDict):
    """A call of a known tool: ``type`` is ``"tool-<tool name>"``; which fields are set depends on ``state``."""

    type: str
    toolCallId: str
    state: ToolState
    input: NotRequired[Any]
    output: NotRequired[Any]
    errorText: NotRequired[str]
    rawInput: NotRequired[Any]
    title: NotRequired[str]
    toolMetadata: NotRequired[dict[str, Any]]
    providerExecuted: NotRequired[bool]
    preliminary: NotRequired[bool]
    approval: NotRequired[ToolApproval]
    callProviderMetadata: NotRequired[ProviderMetadata]
    resultProviderMetadata: NotRequired[ProviderMetadata]


class DynamicToolUIPart(TypedDict):
    """A call of a tool not known ahead (MCP, user-defined): the name is a field, not part of ``type``."""

    type: Literal["dynamic-tool"]
    toolName: str
    toolCallId: str
    state: ToolState
    input: NotRequired[Any]
    output: NotRequired[Any]
    errorText: NotRequired[str]
    title: NotRequired[str]
    toolMetadata: NotRequired[dict[str, Any]]
    providerExecuted: NotRequired[bool]
    preliminary: NotRequired[bool]
    approval: NotRequired[ToolApproval]
    callProviderMetadata: NotRequired[ProviderMetadata]
    resultProviderMetadata: NotRequired[ProviderMetadata]


class SourceUrlUIPart(TypedDict):
    """A web source the answer cites."""

    type: Literal["source-url"]
    sourceId: str
    url: str
    title: NotRequired[str]
    providerMetadata: NotRequired[ProviderMetadata]


class SourceDocumentUIPart(TypedDict):
    """A document source the answer cites."""

    type: Literal["source-document"]
    sourceId: str
    mediaType: str
    title: str
    filename: NotRequired[str]
    providerMetadata: NotRequired[ProviderMetadata]


class FileUIPart(TypedDict):
    """A file, by URL (hosted, or a ``data:`` URL)."""

    type: Literal["file"]
    mediaType: str
    url: str
    filename: NotRequired[str]
    providerReference: NotRequired[dict[str, Any]]
    providerMetadata: NotRequired[ProviderMetadata]


class ReasoningFileUIPart(TypedDict):
    """A file the model produced while reasoning."""

    type: Literal["reasoning-file"]
    mediaType: str
    url: str
    providerMetadata: NotRequired[ProviderMetadata]


class DataUIPart(TypedDict):
    """Application data: ``type`` is ``"data-<name>"``."""

    type: str
    data: Any
    id: NotRequired[str]


class StepStartUIPart(TypedDict):
    """The start of a step in a multi-step answer."""

    type: Literal["step-start"]


UIMessagePart = (
    TextUIPart
    | CustomContentUIPart
    | ReasoningUIPart
    | ToolUIPart
    | DynamicToolUIPart
    | SourceUrlUIPart
    | SourceDocumentUIPart
    | FileUIPart
    | ReasoningFileUIPart
    | DataUIPart
    | StepStartUIPart
)
"""Any part of a message."""


class UIMessage(TypedDict):
    """One message as stored and returned: an id, a role, its parts and optional metadata."""

    id: str
    role: UIRole
    parts: list[UIMessagePart]
    metadata: NotRequired[Any]
