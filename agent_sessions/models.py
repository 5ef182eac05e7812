"""ORM models over the seed's tables (same table and column names).

Every table gets a surrogate ``seq`` key: it is Django's primary key, the
monotonic insertion order that breaks ties in time, and it has a database
default, so rows written by the seed's TypeScript providers (which never name
it) still get one.  The seed's natural keys stay unique.  On PostgreSQL the
database keys of the growing tables all include ``session_id`` (primary key
``(session_id, seq)``) so they can be hash-partitioned; see docs/data-model.md.
"""

from __future__ import annotations

import pgtrigger
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Now
from django.utils import timezone

from . import conf, text, triggers
from .exceptions import InvalidText
from .querysets import MessageQuerySet
from .storage import decode

# DJ001 is silenced line by line below: these text columns are NULL-able in the seed's schema, which other
# writers share (NULL parent = a root, NULL model/source = not recorded); NULL is data, not ''.


def SessionRelation(related_name: str) -> models.ForeignKey:
    """A ``session_id`` column related to ``assistant_sessions.id`` with no database constraint.

    Foreign writers stay valid (no foreign key to satisfy) and rows whose session
    has no registry row (the default namespace ``''``) are fine; deleting a session
    deletes its rows through database triggers, not Django's collector.
    """
    return models.ForeignKey(
        "SessionRecord",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,  # the (session_id, …) indexes serve every lookup
        db_column="session_id",
        related_name=related_name,
        default="",
        db_default="",
    )


class Message(models.Model):
    """One node of a session's message tree (``assistant_messages``)."""

    seq = models.BigAutoField(primary_key=True)
    message_id = models.TextField(db_column="id")
    session = SessionRelation(related_name="messages")
    parent_id = models.TextField(null=True, blank=True)  # noqa: DJ001
    role = models.TextField()
    content = models.TextField(help_text="The UIMessage as JSON.")
    text_content = models.TextField(default="", db_default="", blank=True)
    # Tool inputs/outputs/errors and reasoning, searched below text_content (foreign writers leave '').
    tool_text = models.TextField(default="", db_default="", blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())
    # Extras a foreign writer may leave NULL; readers fall back to a path walk.
    depth = models.IntegerField(null=True, blank=True, help_text="1 for a root.")
    tokens = models.IntegerField(null=True, blank=True, help_text="Estimated tokens of this message.")
    path_tokens = models.BigIntegerField(
        null=True, blank=True, help_text="Estimated tokens from the root to this message, inclusive."
    )
    # Set on copies made by SessionManager.fork: the id this row was copied from
    # (in the parent session), so bookmarks can be mapped onto the fork.
    origin_id = models.TextField(null=True, blank=True, help_text="Id of the message this one was forked from.")  # noqa: DJ001

    objects = MessageQuerySet.as_manager()

    class Meta:
        db_table = "assistant_messages"
        ordering = ["seq"]
        constraints = [
            models.UniqueConstraint(fields=["session_id", "message_id"], name="assistant_messages_session_id_uniq"),
        ]
        indexes = [
            models.Index(fields=["session_id", "parent_id"], name="assistant_msg_sess_parent"),
            models.Index(fields=["session_id", "seq"], name="assistant_msg_sess_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.role}:{self.message_id}"

    @property
    def message(self) -> dict:
        """The stored UIMessage as a dict (a row that holds none comes back marked: ``decode.marked``)."""
        return decode.message(self.content, row_id=self.message_id, role=self.role)


class Compaction(models.Model):
    """A summary overlay replacing ``from..to`` on read (``assistant_compactions``)."""

    seq = models.BigAutoField(primary_key=True)
    compaction_id = models.TextField(db_column="id")
    session = SessionRelation(related_name="compactions")
    summary = models.TextField()
    from_message_id = models.TextField()
    to_message_id = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        db_table = "assistant_compactions"
        ordering = ["seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["session_id", "compaction_id"], name="assistant_compactions_session_id_uniq"
            ),
        ]
        indexes = [models.Index(fields=["session_id", "seq"], name="assistant_cmp_session")]

    def __str__(self) -> str:
        return f"{self.from_message_id}..{self.to_message_id}"


class SessionRecord(models.Model):
    """A named session in the registry (``assistant_sessions``), used by SessionManager."""

    id = models.TextField(primary_key=True)
    name = models.TextField(default="", db_default="")
    parent_session_id = models.TextField(null=True, blank=True)  # noqa: DJ001
    model = models.TextField(null=True, blank=True)  # noqa: DJ001
    source = models.TextField(null=True, blank=True)  # noqa: DJ001
    input_tokens = models.BigIntegerField(default=0, db_default=0)
    output_tokens = models.BigIntegerField(default=0, db_default=0)
    estimated_cost = models.FloatField(default=0, db_default=0)
    end_reason = models.TextField(null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())
    updated_at = models.DateTimeField(default=timezone.now, db_default=Now(), db_index=True)
    message_count = models.BigIntegerField(
        default=0, db_default=0, editable=False, help_text="Stored messages (every branch), kept by triggers."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="agent_sessions"
    )

    class Meta:
        db_table = "assistant_sessions"
        ordering = ["-updated_at"]
        verbose_name = "session"
        permissions = [
            ("export_sessionrecord", "Can export session content"),
            ("compact_sessionrecord", "Can compact a session now"),
        ]

    def __str__(self) -> str:
        return self.name or self.id


PROMPT_KEY = "_system_prompt"
"""The stored prompt's label; a session's is ``_system_prompt_<session id>``."""


def owner_candidates(key: str) -> list[str]:
    """Every id ``i`` for which ``key`` reads ``<label>_<i>`` with a non-empty label, longest first.

    The bare ``_system_prompt`` is the default namespace's stored prompt, never a session's.
    """
    if key == PROMPT_KEY:
        return []
    return [key[i + 1 :] for i in range(1, len(key) - 1) if key[i] == "_"]


def registered_owners(using: str | None, key: str) -> list[str]:
    """The registered session ids (``assistant_sessions``) among :func:`owner_candidates` of ``key``, longest first."""
    ids = owner_candidates(key)
    if not ids:
        return []
    found = set(SessionRecord.objects.using(using).filter(id__in=ids).values_list("id", flat=True))
    return [i for i in ids if i in found]


def infer_owner(using: str | None, key: str) -> str | None:
    """The owner of a row keyed ``key`` whose writer named none: the longest registered id it ends with."""
    found = registered_owners(using, key)
    return found[0] if found else None


def adopt_owner(row: ContextBlockRecord | SearchEntry, using: str | None) -> None:
    """A row saved without an owner takes the one :func:`infer_owner` gives its key.

    Ownerless rows stay possible (raw SQL, the seed's providers); ``''`` is the default namespace's.
    """
    if row.session_id is None and row.label:
        row.session_id = infer_owner(using or row._state.db, row.label)


class ContextBlockRecord(models.Model):
    """Persistent content of a context block or stored prompt (``cf_agents_context_blocks``)."""

    label = models.TextField(primary_key=True)
    content = models.TextField(default="")
    updated_at = models.DateTimeField(default=timezone.now, db_default=Now())
    session_id = models.TextField(  # noqa: DJ001 - NULL (no known owner) differs from the default namespace ''
        null=True, blank=True, help_text="The owning session (NULL: no known owner, e.g. a foreign writer's row)."
    )

    class Meta:
        db_table = "cf_agents_context_blocks"
        verbose_name = "context block"
        indexes = [models.Index(fields=["session_id"], name="cf_agents_blocks_owner_idx")]

    def __str__(self) -> str:
        return self.label

    def save(self, *args, **kwargs) -> None:
        adopt_owner(self, kwargs.get("using"))
        super().save(*args, **kwargs)


class SearchEntry(models.Model):
    """A searchable knowledge entry (``cf_agents_search_entries``)."""

    seq = models.BigAutoField(primary_key=True)
    label = models.TextField()
    key = models.TextField()
    content = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())
    updated_at = models.DateTimeField(default=timezone.now, db_default=Now())
    session_id = models.TextField(  # noqa: DJ001 - NULL (no known owner) differs from the default namespace ''
        null=True, blank=True, help_text="The owning session (NULL: no known owner, e.g. a foreign writer's row)."
    )

    class Meta:
        db_table = "cf_agents_search_entries"
        verbose_name_plural = "search entries"
        indexes = [models.Index(fields=["session_id"], name="cf_agents_entries_owner_idx")]
        constraints = [models.UniqueConstraint(fields=["label", "key"], name="cf_agents_search_entries_uniq")]

    def __str__(self) -> str:
        return f"{self.label}:{self.key}"

    def save(self, *args, **kwargs) -> None:
        adopt_owner(self, kwargs.get("using"))
        super().save(*args, **kwargs)


class CompactionJob(models.Model):
    """Auto-compaction state of one session (``agent_sessions_compaction_jobs``).

    One row per session: the lease that keeps compaction single-flight across
    processes, and the attempts, timestamps and last error an operator sees in
    the admin.  Written by :mod:`agent_sessions.tasks` only.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        IDLE = "idle", "idle"

    session = models.OneToOneField(
        "SessionRecord",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_column="session_id",
        related_name="compaction_job",
    )
    config_name = models.TextField(default="", blank=True, help_text="Registry name; empty for inline (ad-hoc) runs.")
    leaf_id = models.TextField(null=True, blank=True, help_text="Leaf the last request asked for (None: latest).")  # noqa: DJ001
    force = models.BooleanField(default=False, help_text="Compact even under the threshold (a manual request).")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IDLE, db_index=True)
    attempts = models.IntegerField(default=0, help_text="Runs since the last request.")
    last_error = models.TextField(default="", blank=True)
    requested_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    holder = models.TextField(
        default="", blank=True, help_text="Who runs it: host:pid:start-time:task (empty when no run holds the lease)."
    )
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life of the running holder.")
    enqueued_at = models.DateTimeField(
        null=True, blank=True, help_text="When the pending request reached the broker (empty: not published yet)."
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "agent_sessions_compaction_jobs"
        ordering = ["-updated_at"]
        verbose_name = "compaction job"

    def __str__(self) -> str:
        return f"{self.session_id}: {self.status}"


class ApiKey(models.Model):
    """A key for the JSON API (``Authorization: Bearer <token>``), acting as its owner.

    Only a SHA-256 digest of the token is stored: tokens are 32 random bytes,
    so a fast hash is enough (no dictionary to attack) and the plain token is
    shown once, when the key is issued.  ``prefix`` (the token's first
    characters) tells keys apart in the admin and narrows the lookup.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_session_api_keys")
    name = models.CharField(max_length=100, blank=True, default="")
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    hashed_secret = models.CharField(
        max_length=64, unique=True, editable=False, help_text="SHA-256 of the token (hex)."
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked = models.BooleanField(default=False)

    class Meta:
        db_table = "agent_sessions_api_keys"
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or self.owner})"

    def clean(self) -> None:
        """The name's limits for forms (the admin), as :meth:`issue` checks them."""
        try:
            text.check(self.name, "API key name", chars=conf.max_api_key_name_chars())
        except (InvalidText, TypeError) as exc:
            raise ValidationError({"name": str(exc)}) from None

    @classmethod
    def issue(cls, owner, name: str = "", *, using: str | None = None) -> tuple[ApiKey, str]:
        """Create a key for ``owner``; returns it with the plain token (not stored anywhere).

        A name a text column cannot hold (NUL, lone surrogates, over ``AGENT_SESSIONS_MAX_API_KEY_NAME_CHARS``)
        raises :class:`~agent_sessions.exceptions.InvalidText` with nothing written.
        """
        from .credentials import hash_token, new_token, token_prefix

        text.check(name, "API key name", chars=conf.max_api_key_name_chars())
        token = new_token()
        key = cls(owner=owner, name=name, prefix=token_prefix(token), hashed_secret=hash_token(token))
        key.save(using=using)
        return key, token


class ModelCallRecord(models.Model):
    """One recorded model call (SPEC §8): what the model was given and what came of it.

    The input is referenced, never copied: the last message it saw (``leaf_id``; the path
    to it is the history), and the hashes of the prompt text, the tool list and the
    overlays applied, whose content is kept once per session in :class:`ModelCallContent`.
    """

    seq = models.BigAutoField(primary_key=True)
    call_id = models.TextField(db_column="id")
    session_id = models.TextField()
    message_id = models.TextField(null=True, blank=True, help_text="The reply this call produced.")  # noqa: DJ001
    leaf_id = models.TextField(null=True, blank=True, help_text="The last stored message the model saw.")  # noqa: DJ001
    overlays = models.TextField(default="[]", help_text="JSON list: content hashes of the overlays applied.")
    system_hash = models.TextField(null=True, blank=True)  # noqa: DJ001
    tools_hash = models.TextField(null=True, blank=True)  # noqa: DJ001
    sent_hash = models.TextField(  # noqa: DJ001
        null=True, blank=True, help_text="Messages the model got that were not stored yet (by value), if any."
    )
    model = models.TextField()
    params = models.TextField(default="{}", help_text="The call's parameters as JSON.")
    usage = models.TextField(null=True, blank=True, help_text="Token usage as JSON.")  # noqa: DJ001
    cost = models.FloatField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    status = models.TextField(help_text="ok, error, cancelled or unfinished.")
    error = models.TextField(default="", blank=True)
    started_at = models.DateTimeField()

    class Meta:
        db_table = "agent_sessions_model_calls"
        verbose_name = "model call"
        ordering = ["-started_at", "-seq"]
        constraints = [
            models.UniqueConstraint(fields=["session_id", "call_id"], name="agent_sessions_model_calls_id_uniq"),
        ]
        indexes = [
            models.Index(fields=["session_id", "started_at", "seq"], name="as_model_calls_time"),
            models.Index(fields=["session_id", "message_id"], name="as_model_calls_message"),
        ]

    def __str__(self) -> str:
        return f"{self.model}:{self.call_id}"


class ModelCallContent(models.Model):
    """A prompt text, tool list or overlay that a recorded call saw, stored once per session by hash."""

    seq = models.BigAutoField(primary_key=True)
    session_id = models.TextField()
    hash = models.TextField()
    kind = models.TextField(help_text="system, tools or overlay.")
    content = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        db_table = "agent_sessions_model_call_content"
        verbose_name = "model call content"
        constraints = [
            models.UniqueConstraint(fields=["session_id", "hash"], name="agent_sessions_model_call_content_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.hash}"


# Database triggers (see agent_sessions.triggers), registered with django-pgtrigger.
pgtrigger.register(triggers.cascade_session_delete, triggers.count_existing_messages)(SessionRecord)
pgtrigger.register(triggers.protect_message_tree, triggers.count_inserted_messages, triggers.count_deleted_messages)(
    Message
)
