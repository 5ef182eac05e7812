"""Built-in context providers over the Django database and plain text."""

from __future__ import annotations

from django.db import connections, models, router, transaction
from django.db.models import Q
from django.utils import timezone

from .. import conf, text
from ..exceptions import ContextReadOnly
from ..models import ContextBlockRecord, SearchEntry
from ..search.args import query_terms
from ..storage import backends, owners
from ..types import check_indexed

SEARCH_LIMIT = 10


def _key_chars() -> int:
    """Longest stored block key: a label and its ``_<session id>`` suffix."""
    return conf.max_block_label_chars() + 1 + conf.max_id_bytes()


def _checked_key(key: str, what: str) -> str:
    return text.check(key, what, chars=_key_chars())


def _mine(session_id: str) -> Q:
    """The rows a session reads and writes: its own and ownerless ones."""
    return Q(session_id=session_id) | Q(session_id__isnull=True)


def _visible(rows: models.QuerySet, session_id: str | None) -> models.QuerySet:
    """``rows`` as a session sees them (:func:`_mine`); another session's row is absent to it."""
    return rows.filter(_mine(session_id)) if session_id else rows


def _write_owned(rows: models.QuerySet, lookup: dict, values: dict, created: dict, owner: str | None) -> None:
    """Update the row ``lookup`` names, or insert it, as ``owner``'s; never another session's row.

    The seed's keys are ambiguous (``memory_user_X``: label ``memory`` of ``user_X`` or label
    ``memory_user`` of ``X``), so a row another session owns is refused with
    :class:`ContextReadOnly` and left as it is, rather than taken over.
    """
    owned = {} if owner is None else {"session_id": owner}
    with transaction.atomic(using=rows.db):
        if _visible(rows.filter(**lookup), owner).update(**values, **owned):
            return
        _, inserted = rows.get_or_create(**lookup, defaults={**values, **created, **owned})
        if not inserted:
            raise ContextReadOnly(f"{lookup} belongs to another session; nothing was written")


class StaticProvider:
    """A readonly block with fixed text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"StaticProvider({self.text[:30]!r})"

    def get(self) -> str:
        """The fixed text."""
        return self.text


class DjangoContextProvider:
    """A writable block (or a stored prompt) kept as one row of ``cf_agents_context_blocks``.

    ``key`` is the row's ``label``; without one, the block label passed to
    :meth:`init` is used.  ``get()`` returns None when no row exists, so "never
    stored" stays distinct from an empty stored value.  ``session_id`` is the owner
    written into the row (``''``: the default namespace); without one, the registered session the key
    ends with ``_<id>`` of (the longest such id), if any (storage/owners.py).  With a
    session id, a row under the key that another session owns reads as absent.
    """

    def __init__(self, key: str | None = None, *, using: str | None = None, session_id: str | None = None) -> None:
        self.key = key
        self.using = using
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"DjangoContextProvider({self.key!r})"

    def init(self, label: str) -> None:
        """Adopt the block label as the row key when none was given."""
        if self.key is None:
            self.key = label

    def _db(self) -> str:
        return self.using or router.db_for_write(ContextBlockRecord)

    def _key(self) -> str:
        if self.key is None:
            raise ValueError("DjangoContextProvider has no key: pass one or register it as a context block")
        return self.key

    def _owner(self) -> str | None:
        """The owner column of the rows this provider writes."""
        return owners.owner_for(self._db(), self._key(), self.session_id)

    def _row(self):
        """The row under the key; a session's provider sees it only when the session or nobody owns it."""
        return _visible(ContextBlockRecord.objects.using(self._db()).filter(label=self._key()), self.session_id)

    def get(self) -> str | None:
        """The stored content, or None when nothing was ever stored under the key."""
        if not text.storable(self._key()):
            return None  # never stored: no row can have this key
        row = self._row().values_list("content").first()
        return None if row is None else row[0]

    def set(self, content: str) -> None:
        """Insert or replace the row (``InvalidText``, nothing written: NUL, lone surrogates, over a limit;
        ``ContextReadOnly``: another session owns the key)."""
        key = _checked_key(self._key(), "context block key")
        text.check_content(content, "context block content")
        rows = ContextBlockRecord.objects.using(self._db())
        _write_owned(rows, {"label": key}, {"content": content, "updated_at": timezone.now()}, {}, self._owner())

    def set_if_absent(self, content: str) -> str:
        """Store ``content`` unless a row exists; return what is stored (atomic: one INSERT … ON CONFLICT)."""
        key = _checked_key(self._key(), "context block key")
        text.check_content(content, "stored prompt")
        row = ContextBlockRecord(label=key, content=content, updated_at=timezone.now(), session_id=self._owner())
        ContextBlockRecord.objects.using(self._db()).bulk_create([row], ignore_conflicts=True)
        stored = self.get()
        return content if stored is None else stored

    def delete(self) -> bool:
        """Remove the row; True if one existed."""
        if not text.storable(self._key()):
            return False
        deleted, _ = self._row().delete()
        return bool(deleted)


class DjangoSearchProvider:
    """A searchable block over ``cf_agents_search_entries`` (FTS5 on SQLite, tsvector + GIN on Postgres).

    Entries are keyed by ``(label, key)`` where ``label`` is the block label given
    to :meth:`init` (or ``label=`` here); ``get()`` summarises, ``search()`` ranks.
    ``session_id``: the owner written into the entries, as for :class:`DjangoContextProvider`.
    """

    def __init__(self, *, using: str | None = None, label: str | None = None, session_id: str | None = None) -> None:
        self.using = using
        self.label = label
        self.session_id = session_id

    def __repr__(self) -> str:
        return f"DjangoSearchProvider({self.label!r})"

    def init(self, label: str) -> None:
        """Adopt the block label as the entries' label when none was given."""
        if self.label is None:
            self.label = label

    def _db(self) -> str:
        return self.using or router.db_for_write(SearchEntry)

    def _entries(self):
        """The block's entries this provider's session sees (its own and ownerless ones)."""
        if self.label is None:
            raise ValueError("DjangoSearchProvider has no label: register it as a context block first")
        return _visible(SearchEntry.objects.using(self._db()).filter(label=self.label), self.session_id)

    def get(self) -> str:
        """A one-line summary for the prompt: how many entries are indexed."""
        count = self._entries().count()
        if not count:
            return ""
        return f"{count} {'entry' if count == 1 else 'entries'} indexed. Use search_context to find them."

    def search(self, query: str, limit: int = SEARCH_LIMIT) -> list[dict]:
        """Entries containing every word of ``query``, best first, as ``{"key", "content"}``
        (another session's entries under the same label left out)."""
        self._entries()  # validates the label
        terms = query_terms(query)
        if not terms:
            return []
        db = self._db()
        hidden = self._foreign_keys()
        with connections[db].cursor() as cursor:
            rows = backends.for_alias(db).search_entries(cursor, self.label, terms, int(limit) + len(hidden))
        return [{"key": key, "content": content} for key, content in rows if key not in hidden][: int(limit)]

    def _foreign_keys(self) -> set[str]:
        """Keys of the entries under this label that another session owns (none without a session id)."""
        if not self.session_id:
            return set()
        rows = SearchEntry.objects.using(self._db()).filter(label=self.label)
        return set(rows.exclude(_mine(self.session_id)).values_list("key", flat=True))

    def set(self, key: str, content: str) -> None:
        """Insert or replace the entry ``key`` (re-indexed by the database)."""
        if not isinstance(key, str) or not key:
            raise ValueError("entry key must be a non-empty string")
        text.check(key, "search entry key", size=conf.max_search_key_bytes())  # InvalidText
        check_indexed(text.check_content(content, "search entry content"), "search entry content")
        _checked_key(self.label or "", "search entry label")
        now = timezone.now()
        self._entries()  # validates the label
        assert self.label is not None
        owner = owners.owner_for(self._db(), self.label, self.session_id)
        rows = SearchEntry.objects.using(self._db())
        lookup = {"label": self.label, "key": key}
        _write_owned(rows, lookup, {"content": content, "updated_at": now}, {"created_at": now}, owner)

    def delete(self, key: str) -> bool:
        """Remove one entry; True if it existed."""
        if not text.storable(key) or not text.storable(self.label or ""):
            return False
        deleted, _ = self._entries().filter(key=key).delete()
        return bool(deleted)
