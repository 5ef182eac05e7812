"""Admins of messages, compaction overlays, context blocks and search entries."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote as url_quote
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.db import router
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator

from ..models import Compaction, CompactionJob, ContextBlockRecord, Message, SearchEntry
from ..storage.orm import DjangoSessionProvider
from . import search
from .model_calls_page import recorded_replies
from .parts import part_views
from .permissions import access
from .search import BoundedSearchAdmin, EstimatedCountAdmin
from .sessions import TreeMedia, text_condition


def tree_link(session_id: str, focus: str | None = None, label: str | None = None) -> str:
    """A link to the session's tree page (focused on a message when given)."""
    url = reverse("admin:agent_sessions_sessionrecord_tree", args=[quote(session_id)])
    if focus:
        url += f"?{urlencode({'leaf': focus})}#msg-{url_quote(focus, safe='')}"
    return format_html('<a href="{}">{}</a>', url, label or session_id or "(default)")


def excerpt(text: str | None, chars: int = 100) -> str:
    return Truncator(" ".join((text or "").split())).chars(chars)


@admin.register(Message)
class MessageAdmin(EstimatedCountAdmin, BoundedSearchAdmin):
    """Read-only view of stored messages; writes go through the Session API, which keeps totals right."""

    list_display = ("message_id", "session_link", "role", "text", "tokens", "path_tokens", "depth", "created_at")
    list_filter = ("role",)
    search_fields = ("=message_id", "=session__id")
    search_help_text = "Words from message text (full-text, every word must match), or an exact message/session id."
    show_full_result_count = False
    ordering = ("-seq",)
    fields = (
        "message_id",
        "session_link",
        "parent",
        "role",
        "created_at",
        "tokens",
        "path_tokens",
        "depth",
        "forked_from",
        "rendered",
        "raw_json",
    )
    readonly_fields = fields
    Media = TreeMedia

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        match = request.resolver_match
        if match is not None and match.url_name and match.url_name.endswith("changelist"):
            queryset = queryset.defer("content")  # the list shows text_content only
        return queryset

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        """The model-input link only for users who may see model inputs."""
        return (*self.fields[:2], "model_input", *self.fields[2:]) if access(request).inputs else self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        return self.get_fields(request, obj)

    @admin.display(description="model input")
    def model_input(self, obj: Message) -> str:
        """The exact input of the recorded call that wrote this reply (one query), or "—"."""
        if obj.role != "assistant" or not recorded_replies(obj.session_id, [obj.message_id], using=obj._state.db):
            return "—"
        url = reverse("admin:agent_sessions_sessionrecord_model_input", args=[quote(obj.session_id)])
        return format_html(
            '<a href="{}?{}" data-model-input>what the model saw</a>', url, urlencode({"message": obj.message_id})
        )

    @admin.display(description="session", ordering="session_id")
    def session_link(self, obj: Message) -> str:
        return tree_link(obj.session_id, obj.message_id)

    @admin.display(description="parent")
    def parent(self, obj: Message) -> str:
        """The parent message on the session's tree page (the path through it), or "root"."""
        return tree_link(obj.session_id, obj.parent_id, obj.parent_id) if obj.parent_id else "(root)"

    @admin.display(description="forked from")
    def forked_from(self, obj: Message) -> str:
        return obj.origin_id or "—"

    @admin.display(description="text")
    def text(self, obj: Message) -> str:
        return excerpt(obj.text_content)

    @admin.display(description="message")
    def rendered(self, obj: Message) -> str:
        return render_to_string("admin/agent_sessions/tree/_parts.html", {"parts": part_views(obj.message)})

    @admin.display(description="stored JSON")
    def raw_json(self, obj: Message) -> str:
        try:
            text = json.dumps(obj.message, indent=2, ensure_ascii=False)
        except ValueError:
            text = obj.content
        return format_html('<pre class="as-json">{}</pre>', text)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        """Full-text hits across every session and messages whose id or session id is the term: one
        ``seq IN (search SQL UNION ALL id lookups)`` condition (see ``search.text_condition``)."""
        if not search_term.strip():
            return queryset, False
        found = text_condition(request, search_term, "seq", exact_ids=True)
        if found is None:
            return queryset.none(), False
        self._point_at_summaries(request, search_term)
        return queryset.filter(found), False

    def _point_at_summaries(self, request: HttpRequest, search_term: str) -> None:
        """A link to the compaction changelist when summaries match too (for users who may read them)."""
        if not request.user.has_perm("agent_sessions.view_compaction"):
            return
        using = router.db_for_read(Compaction)
        summaries = search.text_condition(search_term, using=using, summaries=True).q
        if summaries is not None and Compaction.objects.using(using).filter(summaries).exists():
            url = reverse("admin:agent_sessions_compaction_changelist") + "?" + urlencode({"q": search_term})
            messages.info(request, format_html('Compaction summaries match too: <a href="{}">see them</a>.', url))

    def delete_model(self, request: HttpRequest, obj: Message) -> None:
        DjangoSessionProvider(obj.session_id).delete_messages([obj.message_id])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        """Delete through the provider so the children's depth and path tokens are re-derived."""
        by_session: dict[str, list[str]] = {}
        for session_id, message_id in queryset.values_list("session_id", "message_id"):
            by_session.setdefault(session_id, []).append(message_id)
        for session_id, ids in by_session.items():
            DjangoSessionProvider(session_id).delete_messages(ids)


@admin.register(Compaction)
class CompactionAdmin(BoundedSearchAdmin):
    list_display = ("compaction_id", "session_link", "from_message", "to_message", "short_summary", "created_at")
    search_fields = ("=compaction_id", "=session__id")
    search_help_text = "Words from the summary (full-text, every word must match), or an exact overlay/session id."
    readonly_fields = ("compaction_id", "session_link", "from_message", "to_message", "created_at")
    fields = ("compaction_id", "session_link", "from_message", "to_message", "summary", "created_at")
    ordering = ("-seq",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # overlays come from compact()/add_compaction, which check the range

    @admin.display(description="session", ordering="session_id")
    def session_link(self, obj: Compaction) -> str:
        return tree_link(obj.session_id, obj.to_message_id)

    @admin.display(description="from message", ordering="from_message_id")
    def from_message(self, obj: Compaction) -> str:
        """The range's first message, opened on the tree page (the compacted range opens at it)."""
        return tree_link(obj.session_id, obj.from_message_id, obj.from_message_id)

    @admin.display(description="to message", ordering="to_message_id")
    def to_message(self, obj: Compaction) -> str:
        return tree_link(obj.session_id, obj.to_message_id, obj.to_message_id)

    @admin.display(description="summary")
    def short_summary(self, obj: Compaction) -> str:
        return excerpt(obj.summary)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        """Exact ids, plus summaries matching through their full-text index (migration 0004)."""
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        if search_term.strip():
            found = text_condition(request, search_term, "seq", summaries=True)
            if found is not None:
                results = results | queryset.filter(found)
        return results, may_have_duplicates


@admin.register(ContextBlockRecord)
class ContextBlockAdmin(BoundedSearchAdmin):
    list_display = ("label", "session_id", "short_content", "size", "updated_at")
    search_fields = ("label", "content")
    ordering = ("label",)

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        """The label and the owner are one-line keys, not textareas."""
        if db_field.name in {"label", "session_id"}:
            kwargs["widget"] = forms.TextInput(attrs={"class": "vTextField"})
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        """The label is the primary key: editing it would copy the block under a new key, so it is fixed once saved."""
        return ("label", *super().get_readonly_fields(request, obj)) if obj is not None else ()

    @admin.display(description="content")
    def short_content(self, obj: ContextBlockRecord) -> str:
        return excerpt(obj.content)

    @admin.display(description="characters")
    def size(self, obj: ContextBlockRecord) -> int:
        return len(obj.content or "")


@admin.register(SearchEntry)
class SearchEntryAdmin(BoundedSearchAdmin):
    list_display = ("label", "key", "session_id", "short_content", "updated_at")
    list_filter = ("label",)
    search_fields = ("key", "content")
    ordering = ("label", "key")

    @admin.display(description="content")
    def short_content(self, obj: SearchEntry) -> str:
        return excerpt(obj.content)


@admin.register(CompactionJob)
class CompactionJobAdmin(BoundedSearchAdmin):
    """Compaction job state per session (written by the Celery task): where failures are recorded."""

    list_display = (
        "session_link", "status", "config_name", "attempts", "error", "holder_short", "lease_until", "heartbeat_at",
        "requested_at", "finished_at",
    )  # fmt: skip
    list_filter = ("status", "config_name")
    search_fields = ("=session__id", "last_error", "holder")
    ordering = ("-updated_at",)
    actions = ("reset_jobs",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_reset_permission(self, request: HttpRequest) -> bool:
        """Staff who may change jobs may reset them (the rows are otherwise read-only)."""
        return request.user.has_perm("agent_sessions.change_compactionjob")

    @admin.action(description="Reset the selected jobs (free a stuck lease)", permissions=["reset"])
    def reset_jobs(self, request: HttpRequest, queryset) -> None:
        """Free the lease and mark the jobs idle: the next append or request starts afresh.

        A run still alive elsewhere cannot record over the reset (its release no longer
        matches its holder) and stores at most its own overlay.
        """
        now = timezone.now()
        note = f"reset by {request.user.get_username()} at {now:%Y-%m-%d %H:%M:%S} UTC"
        count = queryset.update(
            status=CompactionJob.Status.IDLE, lease_until=None, holder="", heartbeat_at=None, enqueued_at=None,
            last_error=note, finished_at=now, updated_at=now,
        )  # fmt: skip
        self.message_user(request, f"Reset {count} compaction job(s).", messages.SUCCESS)

    @admin.display(description="lease holder", ordering="holder")
    def holder_short(self, obj: CompactionJob) -> str:
        return obj.holder or "—"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="session", ordering="session_id")
    def session_link(self, obj: CompactionJob) -> str:
        return tree_link(obj.session_id)

    @admin.display(description="last error")
    def error(self, obj: CompactionJob) -> str:
        return excerpt(obj.last_error, 160)
