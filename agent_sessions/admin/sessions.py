"""Admin of the session registry: list with counts, the message-tree page and its actions."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote as url_quote
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db import models, router
from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from ..exceptions import AgentSessionsError
from ..models import (
    PROMPT_KEY,
    Compaction,
    CompactionJob,
    ContextBlockRecord,
    Message,
    ModelCallContent,
    ModelCallRecord,
    SearchEntry,
    SessionRecord,
)
from . import export, hooks, search
from .compare import compare_inputs
from .long_text import long_text
from .model_calls_page import Filters, input_context, read_input, timeline_context
from .permissions import Access, access
from .search import BoundedSearchAdmin, EstimatedCountAdmin
from .tree_page import FRAGMENT_LIMIT, Urls, fragment_context, tree_context


def text_condition(
    request: HttpRequest, search_term: str, column: str, summaries: bool = False, exact_ids: bool = False
) -> Q | None:
    """A changelist search box's full-text condition (see :func:`.search.text_condition`); a warning on the
    page when the search language refuses the query, None when nothing can match."""
    found = search.text_condition(
        search_term, using=router.db_for_read(Message), column=column, summaries=summaries, exact_ids=exact_ids
    )
    if found.refused:
        messages.warning(request, f"Full-text search refused: {found.refused}.")
    return found.q


def compaction_state_subquery() -> Subquery:
    """The session's compaction job status (one row per session), as a correlated subquery."""
    return Subquery(CompactionJob.objects.filter(session_id=OuterRef("pk")).values("status")[:1])


class CompactionStateFilter(admin.SimpleListFilter):
    """Sessions by the state of their compaction job (e.g. the failed ones)."""

    title = "compaction"
    parameter_name = "compaction"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*CompactionJob.Status.choices, ("none", "never compacted")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value == "none":
            return queryset.exclude(pk__in=CompactionJob.objects.values("session_id"))
        if value:
            return queryset.filter(pk__in=CompactionJob.objects.filter(status=value).values("session_id"))
        return queryset


def _int(value: str | None) -> int | None:
    """A page number from the query string (None when absent or not a number)."""
    try:
        return int(value) if value else None
    except ValueError:
        return None


TEXT_STEP = 100_000
"""Characters of a long text one "show all" step loads (a 490 KB summary takes five)."""


class TreeMedia:
    css = {"all": ("agent_sessions/tree.css",)}
    js = ("agent_sessions/tree.js",)


@admin.register(SessionRecord)
class SessionRecordAdmin(EstimatedCountAdmin, BoundedSearchAdmin):
    list_display = (
        "__str__",
        "model",
        "source",
        "message_count",
        "tokens",
        "cost",
        "end_reason",
        "compaction",
        "updated_at",
    )
    list_filter = ("model", "source", "end_reason", CompactionStateFilter)
    search_fields = ("id", "name")
    search_help_text = "Session id or name, or words from any message (full-text)."
    raw_id_fields = ("owner",)
    readonly_fields = ("created_at", "updated_at", "input_tokens", "output_tokens", "estimated_cost", "fork_parent")
    fieldsets = (
        (None, {"fields": ("id", "name", "model", "source", "end_reason", "parent_session_id", "fork_parent")}),
        (
            "Usage and ownership",
            {
                "classes": ("collapse",),
                "fields": ("input_tokens", "output_tokens", "estimated_cost", "owner", "created_at", "updated_at"),
            },
        ),
    )
    actions = ("compact_now", "export_json")
    change_form_template = "admin/agent_sessions/sessionrecord/change_form.html"
    formfield_overrides = {models.TextField: {"widget": forms.TextInput(attrs={"class": "vTextField"})}}
    Media = TreeMedia

    # ── changelist ──────────────────────────────────────────────────
    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return (
            super()
            .get_queryset(request)
            .annotate(
                total_tokens=F("input_tokens") + F("output_tokens"),
                compaction_state=compaction_state_subquery(),
            )
        )

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple:
        """The confirmation page also counts every row the database deletes with the sessions (its
        triggers): one ``COUNT`` per table, no row loaded."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        ids = list(objs.values_list("pk", flat=True)) if isinstance(objs, QuerySet) else [o.pk for o in objs]
        owned = {"session_id__in": [i for i in ids if i]}  # the triggers leave the default namespace '' alone
        prompts = [f"{PROMPT_KEY}_{i}" for i in ids if i]
        querysets: list[tuple[type[models.Model], QuerySet]] = [
            (Message, Message.objects.filter(**owned)),
            (Compaction, Compaction.objects.filter(**owned)),
            (CompactionJob, CompactionJob.objects.filter(**owned)),
            (ContextBlockRecord, ContextBlockRecord.objects.filter(Q(**owned) | Q(session_id=None, label__in=prompts))),
            (SearchEntry, SearchEntry.objects.filter(**owned)),
            (ModelCallRecord, ModelCallRecord.objects.filter(**owned)),
            (ModelCallContent, ModelCallContent.objects.filter(**owned)),
        ]
        for model, rows in querysets:
            n = rows.count()
            if n:
                counts[model._meta.verbose_name_plural] = n
        return deleted, counts, perms_needed, protected

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        return (*self.readonly_fields, "id") if obj is not None else self.readonly_fields

    @admin.display(description="forked from")
    def fork_parent(self, obj: SessionRecord) -> str:
        """The parent session's message tree (sessions made by fork or compact-and-split)."""
        if not obj.parent_session_id:
            return "—"
        return format_html(
            '<a href="{}" data-fork-parent>{}</a>', self._url("tree", obj.parent_session_id), obj.parent_session_id
        )

    @admin.display(description="messages", ordering="message_count")
    def message_count(self, obj: SessionRecord) -> int:
        """Kept by database triggers (every writer's messages count), so no subquery per row."""
        return obj.message_count

    @admin.display(description="tokens", ordering="total_tokens")
    def tokens(self, obj: SessionRecord) -> int:
        return obj.total_tokens

    @admin.display(description="compaction", ordering="compaction_state")
    def compaction(self, obj: SessionRecord) -> str:
        if obj.compaction_state == CompactionJob.Status.FAILED:
            return format_html('<span class="as-failed">{}</span>', obj.compaction_state)
        return obj.compaction_state or "—"

    @admin.display(description="cost", ordering="estimated_cost")
    def cost(self, obj: SessionRecord) -> str:
        return f"{obj.estimated_cost:.4f}"

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        """Name/id matches plus sessions having a message with every word (FTS5 / tsvector)."""
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        if search_term.strip() and access(request).messages:  # else which sessions match would leak the words
            found = text_condition(request, search_term, "session_id")
            if found is not None:
                results = results | queryset.filter(found)
        return results, may_have_duplicates

    def get_search_help_text(self, request: HttpRequest) -> str:
        return self.search_help_text if access(request).messages else "Session id or name."

    # ── actions ─────────────────────────────────────────────────────
    def has_compact_permission(self, request: HttpRequest) -> bool:
        return access(request).compact

    def has_export_permission(self, request: HttpRequest) -> bool:
        return access(request).export

    @admin.action(description="Compact now (enqueue the compaction task, latest branch)", permissions=["compact"])
    def compact_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        for record in queryset:
            self._enqueue(request, record.pk, None, None)

    @admin.action(description="Export as JSON", permissions=["export"])
    def export_json(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse:
        return export.json_download(export.iter_sessions(queryset.order_by("pk")), "sessions.json")

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        """A posted action the user may not run answers 403 (Django would re-render the list, "no action selected")."""
        name = request.POST.get("action", "") if request.method == "POST" else ""
        action = getattr(type(self), name, None) if name in (self.actions or ()) else None
        for permission in getattr(action, "allowed_permissions", ()):
            if not getattr(self, f"has_{permission}_permission")(request):
                raise PermissionDenied
        return super().changelist_view(request, extra_context)

    def _enqueue(self, request: HttpRequest, session_id: str, config: str | None, leaf_id: str | None) -> None:
        try:
            self.message_user(request, hooks.compact_now(session_id, config, leaf_id), messages.SUCCESS)
        except hooks.ActionUnavailable as exc:
            self.message_user(request, str(exc), messages.ERROR)
        status = hooks.compaction_status(session_id)
        if status is not None and status.failed:
            self.message_user(request, f"Compaction of {session_id!r} failed: {status.error}", messages.ERROR)

    # ── extra views ─────────────────────────────────────────────────
    def get_urls(self) -> list:
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/tree/", wrap(self.tree_view), name=f"{prefix}_tree"),
            path("<path:object_id>/tree/fragment/", wrap(self.fragment_view), name=f"{prefix}_tree_fragment"),
            path("<path:object_id>/tree/text/", wrap(self.text_view), name=f"{prefix}_tree_text"),
            path("<path:object_id>/compact/", wrap(self.compact_view), name=f"{prefix}_compact"),
            path("<path:object_id>/fork/", wrap(self.fork_view), name=f"{prefix}_fork"),
            path("<path:object_id>/export/", wrap(self.export_view), name=f"{prefix}_export"),
            path("<path:object_id>/model-calls/", wrap(self.calls_view), name=f"{prefix}_model_calls"),
            path("<path:object_id>/model-calls/input/", wrap(self.input_view), name=f"{prefix}_model_input"),
            path("<path:object_id>/model-calls/compare/", wrap(self.compare_view), name=f"{prefix}_model_compare"),
            *super().get_urls(),
        ]

    def _url(self, name: str, session_id: str) -> str:
        return reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_{name}",
            args=[quote(session_id)],
            current_app=self.admin_site.name,
        )

    def _urls(self, session_id: str, page_url: str, allowed: Access) -> Urls:
        compaction = reverse("admin:agent_sessions_compaction_change", args=["0"], current_app=self.admin_site.name)
        return Urls(
            page=page_url,
            fragment=self._url("tree_fragment", session_id),
            text=self._url("tree_text", session_id),
            compaction=compaction.replace("/0/", "/{}/"),
            model_input=self._url("model_input", session_id) if allowed.inputs else "",
        )

    def _tree_context(self, request: HttpRequest, session_id: str, page_url: str, record: Any = None) -> dict:
        allowed = access(request)
        urls = self._urls(session_id, page_url, allowed)
        get = request.GET
        context = tree_context(
            session_id,
            urls,
            leaf=get.get("leaf", "").strip(),
            focus=get.get("focus", "").strip(),
            at=get.get("at", ""),
            page=_int(get.get("page")),
            query=get.get("q", "").strip(),
            hits_page=_int(get.get("hits")) or 1,
            record=record,
            using=router.db_for_read(Message),
            blocks=allowed.blocks,
        )
        context.update(
            session_id=session_id,
            compact_url=self._url("compact", session_id),
            fork_url=self._url("fork", session_id),
            export_url=self._url("export", session_id),
            calls_url=self._url("model_calls", session_id) if allowed.calls else "",
            compaction_configs=hooks.compaction_configs(),
            compaction_status=hooks.compaction_status(session_id),
            can_change=allowed.compact,
            can_export=allowed.export,
            can_fork=self.has_add_permission(request),
        )
        return context

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict,
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        if obj is not None and not add:
            allowed = access(request)
            if allowed.messages:
                context["as_tree"] = self._tree_context(request, obj.pk, request.path, obj)
            context["as_calls_url"] = self._url("model_calls", obj.pk) if allowed.calls else ""
            context["as_export_url"] = self._url("export", obj.pk) if allowed.export else ""
        return super().render_change_form(request, context, add, change, form_url, obj)

    def _require(self, request: HttpRequest, permission: str, *content: str) -> None:
        """403 unless the user holds the session model's ``permission`` and each named grant of :class:`Access`."""
        if not getattr(self, f"has_{permission}_permission")(request):
            raise PermissionDenied
        allowed = access(request)
        if not all(getattr(allowed, what) for what in content):
            raise PermissionDenied

    def tree_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The tree page for any session id, with or without a registry row (messages link here)."""
        self._require(request, "view", "messages")
        session_id = unquote(object_id)
        record = SessionRecord.objects.filter(pk=session_id).first()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Messages of {record or session_id}",
            "subtitle": session_id,
            "original": record,
            "media": self.media,
            "as_tree": self._tree_context(request, session_id, request.path, record),
        }
        return TemplateResponse(request, "admin/agent_sessions/sessionrecord/tree.html", context)

    def fragment_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """An HTML fragment: a branch or a compacted range, loaded when its ``<details>`` opens."""
        self._require(request, "view", "messages")
        session_id = unquote(object_id)
        node = request.GET.get("node")
        if not node:
            raise Http404("node is required")
        urls = self._urls(session_id, self._url("tree", session_id), access(request))
        context = fragment_context(
            session_id,
            urls,
            start=node,
            toward=request.GET.get("toward", ""),
            until=request.GET.get("until", ""),
            using=router.db_for_read(Message),
            limit=_int(request.GET.get("n")) or FRAGMENT_LIMIT,
        )
        if context.get("missing"):
            raise Http404("no such message")
        context.update(can_fork=self.has_add_permission(request))
        return TemplateResponse(request, "admin/agent_sessions/tree/fragment.html", context)

    def text_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The rest of a long text the page cut: a message part's field, a summary, or a context block."""
        self._require(request, "view", "blocks" if request.GET.get("block") else "messages")
        rest = long_text(unquote(object_id), request.GET, using=router.db_for_read(Message))
        if rest is None:
            raise Http404("no such text")
        offset = max(0, _int(request.GET.get("offset")) or 0)
        chunk = rest[offset : offset + TEXT_STEP]
        more = len(rest) - offset - len(chunk)
        query = request.GET.copy()
        query["offset"] = str(offset + len(chunk))
        return TemplateResponse(
            request,
            "admin/agent_sessions/tree/text.html",
            {
                "rest": chunk,
                "more": more,
                "more_url": f"{request.path}?{query.urlencode()}",
            },
        )

    def _back(self, request: HttpRequest, session_id: str) -> HttpResponseRedirect:
        fallback = self._url("tree", session_id)
        target = request.POST.get("next") or fallback
        return HttpResponseRedirect(target if target.startswith("/") and not target.startswith("//") else fallback)

    def compact_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: enqueue the compaction task for this session, then back to the page (status shown there)."""
        self._require(request, "view", "compact")
        if request.method != "POST":
            return HttpResponse(status=405, headers={"Allow": "POST"})
        session_id = unquote(object_id)
        self._enqueue(request, session_id, request.POST.get("config") or None, request.POST.get("leaf") or None)
        return self._back(request, session_id)

    def fork_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST ``at``: fork the path up to that message into a new session and open it."""
        self._require(request, "add", "messages")
        if request.method != "POST":
            return HttpResponse(status=405, headers={"Allow": "POST"})
        session_id = unquote(object_id)
        at = request.POST.get("at", "")
        record = SessionRecord.objects.filter(pk=session_id).first()
        name = request.POST.get("name") or f"{record or session_id} (fork at {at})"
        try:
            new_id = hooks.fork_session(session_id, at, name)
        except (hooks.ActionUnavailable, AgentSessionsError, ValueError, LookupError) as exc:
            self.message_user(request, f"Fork failed: {exc}", messages.ERROR)
            return self._back(request, session_id)
        self.message_user(request, f"Forked {session_id!r} at {at!r} into {new_id!r}.", messages.SUCCESS)
        return HttpResponseRedirect(self._url("change", new_id))

    def export_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The whole session as JSON, or with ``?leaf=`` that branch's ``get_history``."""
        self._require(request, "view", "export")
        session_id = unquote(object_id)
        leaf = request.GET.get("leaf")
        if leaf:
            if not Message.objects.filter(session_id=session_id, message_id=leaf).exists():
                raise Http404("no such message in this session")
            return JsonResponse(export.history_document(session_id, leaf), json_dumps_params={"ensure_ascii": False})
        record = SessionRecord.objects.filter(pk=session_id).first()
        if record is None and not Message.objects.filter(session_id=session_id).exists():
            raise Http404("no such session")
        return export.json_download(export.iter_session(session_id, record), f"session-{session_id}.json")

    # ── model calls (SPEC §8) ───────────────────────────────────────
    def _calls_page(
        self, request: HttpRequest, session_id: str, title: str, template: str, **extra: Any
    ) -> HttpResponse:
        record = SessionRecord.objects.filter(pk=session_id).first()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "subtitle": session_id,
            "original": record,
            "session_id": session_id,
            "media": self.media,
            "calls_url": self._url("model_calls", session_id),
            "tree_url": self._url("tree", session_id),
            **extra,
        }
        return TemplateResponse(request, f"admin/agent_sessions/model_calls/{template}.html", context)

    def _input_link(self, session_id: str) -> Any:
        base = self._url("model_input", session_id)

        def link(message_id: str, page: int = 1) -> str:
            query = {"message": message_id, **({"page": page} if page > 1 else {})}
            return f"{base}?{urlencode(query)}"

        return link

    def _compare_link(self, session_id: str) -> Any:
        base = self._url("model_compare", session_id)
        return lambda a, b: f"{base}?{urlencode({'a': a, 'b': b})}"

    def calls_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The session's recorded calls, newest first: filters (model, status, dates, slow, expensive) and totals."""
        self._require(request, "view", "calls")
        session_id = unquote(object_id)
        filters = Filters.parse(request.GET)
        for error in filters.errors:
            self.message_user(request, f"Filter ignored: {error}", messages.WARNING)
        page_url = self._url("model_calls", session_id)
        input_link = self._input_link(session_id) if access(request).inputs else (lambda *a: "")
        timeline = timeline_context(
            session_id,
            filters,
            page=_int(request.GET.get("page")) or 1,
            page_url=page_url,
            input_url=input_link,
            using=router.db_for_read(ModelCallRecord),
        )
        return self._calls_page(request, session_id, "Model calls", "timeline", t=timeline)

    def input_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Exactly what the model was given when it wrote ``?message=`` (``Session.model_input``)."""
        self._require(request, "view", "calls", "messages")
        session_id = unquote(object_id)
        message_id = request.GET.get("message", "")
        context = input_context(
            session_id,
            message_id,
            page=_int(request.GET.get("page")) or 1,
            input_url=self._input_link(session_id),
            compare_url=self._compare_link(session_id),
            using=router.db_for_read(ModelCallRecord),
        )
        if context is None:
            raise Http404("no recorded call produced this message")
        context["show_system"] = access(request).blocks
        context["reply_url"] = (
            reverse(
                "admin:agent_sessions_sessionrecord_tree", args=[quote(session_id)], current_app=self.admin_site.name
            )
            + f"?{urlencode({'leaf': message_id})}#msg-{url_quote(message_id, safe='')}"
        )
        return self._calls_page(request, session_id, f"Model input of {message_id}", "input", i=context)

    def compare_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Two sibling replies (same parent) side by side: input and output differences highlighted."""
        self._require(request, "view", "calls", "messages")
        session_id = unquote(object_id)
        a, b = request.GET.get("a", ""), request.GET.get("b", "")
        using = router.db_for_read(Message)
        rows = {
            r.message_id: r
            for r in Message.objects.using(using)
            .filter(session_id=session_id, message_id__in=[a, b])
            .only("message_id", "parent_id", "content", "role")
        }
        if a not in rows or b not in rows or a == b:
            raise Http404("compare two different messages of this session")
        if rows[a].parent_id != rows[b].parent_id:
            self.message_user(request, "These replies are not siblings (their parents differ).", messages.WARNING)
        left, right = read_input(session_id, a, using=using), read_input(session_id, b, using=using)
        show_system = access(request).blocks
        if not show_system:
            for seen in (left, right):
                if seen is not None:
                    seen["system"] = "(hidden: needs the view context block permission)"
        sections = compare_inputs(left, right, rows[a].message, rows[b].message)
        input_link = self._input_link(session_id)
        return self._calls_page(
            request,
            session_id,
            f"Compare {a} and {b}",
            "compare",
            a=a,
            b=b,
            left=left,
            right=right,
            a_url=input_link(a) if left else "",
            b_url=input_link(b) if right else "",
            swap_url=self._compare_link(session_id)(b, a),
            sections=sections,
        )
