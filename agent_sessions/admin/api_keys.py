"""Admin of JSON API keys: issue (the token is shown once), list, revoke. Only digests are stored."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from ..models import ApiKey
from .search import BoundedSearchAdmin


@admin.register(ApiKey)
class ApiKeyAdmin(BoundedSearchAdmin):
    list_display = ("prefix", "name", "owner", "created_at", "last_used_at", "revoked")
    list_filter = ("revoked",)
    search_fields = ("=prefix", "name", "owner__username")
    raw_id_fields = ("owner",)
    readonly_fields = ("prefix", "created_at", "last_used_at")
    actions = ("revoke",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        if obj is None:
            return ("owner", "name")
        return ("prefix", "owner", "name", "created_at", "last_used_at", "revoked")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        return () if obj is None else (*self.readonly_fields, "owner")

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        """A new key gets a fresh token; its plain value is shown in this response only."""
        if change:
            super().save_model(request, obj, form, change)
            return
        from ..credentials import hash_token, new_token, token_prefix

        token = new_token()
        obj.prefix, obj.hashed_secret = token_prefix(token), hash_token(token)
        super().save_model(request, obj, form, change)
        self.message_user(
            request,
            f"API key issued. Copy the token now, it is not stored and will not be shown again: {token}",
            messages.WARNING,
        )

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = queryset.update(revoked=True)
        self.message_user(request, f"Revoked {count} key(s).", messages.SUCCESS)
