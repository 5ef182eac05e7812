"""Admin for :class:`~agent_sessions.models.ApiKey`, for the admin module to register.

Not registered here (the admin package owns registrations)::

    from agent_sessions.api.admin_snippet import ApiKeyAdmin
    admin.site.register(ApiKey, ApiKeyAdmin)

Adding a key generates its token and shows it once, in the success message;
only the digest and the prefix are stored.  Revoke keys with the action.
"""

from __future__ import annotations

from django.contrib import admin, messages

from ..models import ApiKey
from .tokens import hash_token, new_token, token_prefix


class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "owner", "created_at", "last_used_at", "revoked")
    list_filter = ("revoked",)
    search_fields = ("prefix", "name", "owner__username")
    readonly_fields = ("prefix", "created_at", "last_used_at")
    fields = ("owner", "name", "prefix", "created_at", "last_used_at", "revoked")
    raw_id_fields = ("owner",)
    actions = ("revoke",)

    def save_model(self, request, obj: ApiKey, form, change: bool) -> None:
        if not change:
            token = new_token()
            obj.prefix, obj.hashed_secret = token_prefix(token), hash_token(token)
            super().save_model(request, obj, form, change)
            messages.warning(request, f"API key created. Copy the token now, it is not shown again: {token}")
            return
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke selected API keys")
    def revoke(self, request, queryset) -> None:
        count = queryset.update(revoked=True)
        self.message_user(request, f"Revoked {count} key(s).")
