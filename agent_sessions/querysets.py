"""``Message.objects``: tree- and search-aware querysets that chain with ``filter``/``annotate``/``values``.

``path()`` and ``search()`` join a subquery built from the storage's own SQL
(the path walk of :mod:`agent_sessions.storage.orm`, the search compilers of
:mod:`agent_sessions.search`), so the ORM and the Session API read the same rows
the same way.  See docs/data-model.md for examples.
"""

from __future__ import annotations

from typing import Any, Self

from django.db import connections, models
from django.db.models import Exists, OuterRef, Q
from django.db.models.expressions import Expression
from django.db.models.sql.constants import INNER

from .search.args import as_query, query_terms
from .search.cost import check as check_cost
from .search.query import Query
from .storage import walks


class SubqueryJoin:
    """``INNER JOIN (<sql>) alias ON alias.seq = <messages>.seq``, an entry of a query's alias map.

    Django has no public API for joining a subquery; this implements what its
    ``Join`` offers the SQL compiler (rendering, relabelling in subqueries).
    ``sql`` is a string, or a callable ``(connection) -> (sql, params)`` for SQL
    that depends on the database (called when the query is compiled).
    """

    filtered_relation = None
    nullable = False

    def __init__(self, table_name: str, parent_alias: str, table_alias: str | None, sql: Any, params=()) -> None:
        self.table_name = table_name
        self.parent_alias = parent_alias
        self.table_alias = table_alias
        self.join_type = INNER
        self.sql = sql
        self.params = tuple(params)

    def as_sql(self, compiler, connection) -> tuple[str, list]:
        sql, params = self.sql(connection) if callable(self.sql) else (self.sql, list(self.params))
        qn = compiler.quote_name_unless_alias
        on = f"{qn(self.table_alias)}.seq = {qn(self.parent_alias)}.seq"
        return f"{self.join_type} ({sql}) {qn(self.table_alias)} ON ({on})", list(params)

    def relabeled_clone(self, change_map: dict) -> SubqueryJoin:
        clone = SubqueryJoin(
            self.table_name,
            change_map.get(self.parent_alias, self.parent_alias),
            change_map.get(self.table_alias, self.table_alias),
            self.sql,
            self.params,
        )
        clone.join_type = self.join_type
        return clone

    @property
    def identity(self) -> tuple:
        return (self.__class__, self.table_name, self.parent_alias, self.table_alias, id(self.sql), self.params)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubqueryJoin) and self.identity == other.identity

    def __hash__(self) -> int:
        return hash(self.identity)

    def demote(self) -> SubqueryJoin:
        return self.relabeled_clone({})

    promote = demote  # a match is required: the join never becomes LEFT OUTER


class InRows(Expression):
    """``<field> IN (<sql>)``: a boolean filter on the values a storage-built subquery selects.

    The admin's changelist search filters by its hits this way (``sql`` from the search compilers),
    so the database joins them and nothing but the query text crosses the wire. ``sql`` is a
    callable ``(connection) -> (sql, params)`` or a ``(sql, params)`` pair built for the query's database.
    """

    output_field = models.BooleanField()

    def __init__(self, field: str, sql: Any) -> None:
        super().__init__()
        self.lhs: Any = models.F(field)
        self.sql = sql

    def get_source_expressions(self) -> list:
        return [self.lhs]

    def set_source_expressions(self, exprs: list) -> None:
        (self.lhs,) = exprs

    def as_sql(self, compiler, connection) -> tuple[str, list]:
        lhs, lhs_params = compiler.compile(self.lhs)
        sql, params = self.sql(connection) if callable(self.sql) else self.sql
        return f"{lhs} IN ({sql})", [*lhs_params, *params]


class JoinedColumn(Expression):
    """A column of a joined subquery, as an expression Django can relabel and group by."""

    contains_column_references = True

    def __init__(self, alias: str, column: str, output_field: models.Field) -> None:
        super().__init__(output_field=output_field)
        self.alias, self.column = alias, column

    def as_sql(self, compiler, connection) -> tuple[str, list]:
        return f"{compiler.quote_name_unless_alias(self.alias)}.{connection.ops.quote_name(self.column)}", []

    def relabeled_clone(self, relabels: dict) -> JoinedColumn:
        return JoinedColumn(relabels.get(self.alias, self.alias), self.column, self.output_field)

    def get_group_by_cols(self) -> list:
        return [self]


class MessageQuerySet(models.QuerySet):
    """Querysets over ``assistant_messages`` that know the tree and the search index."""

    _session_scope: str | None = None

    def _clone(self) -> Self:
        clone = super()._clone()
        clone._session_scope = self._session_scope
        return clone

    def _scope(self) -> str | None:
        """The session these rows are limited to: ``for_session()``'s, or ``record.messages``'."""
        if self._session_scope is not None:
            return self._session_scope
        instance = self._hints.get("instance")
        related = self.model._meta.get_field("session").related_model
        return instance.pk if isinstance(instance, related) else None

    def for_session(self, session_id: str) -> Self:
        """Messages of one session (``''`` is the default namespace); ``path()`` needs it."""
        if not isinstance(session_id, str) or "\x00" in session_id:
            raise ValueError("session_id must be a string without NUL characters")
        clone = self.filter(session_id=session_id)
        clone._session_scope = session_id
        return clone

    def roots(self) -> Self:
        """Messages with no parent in their session (first messages, and orphans of deleted parents)."""
        parent = self.model._base_manager.filter(session_id=OuterRef("session_id"), message_id=OuterRef("parent_id"))
        return self.filter(Q(parent_id__isnull=True) | ~Exists(parent))

    def leaves(self) -> Self:
        """Messages with no child: the ends of the branches."""
        child = self.model._base_manager.filter(session_id=OuterRef("session_id"), parent_id=OuterRef("message_id"))
        return self.filter(~Exists(child))

    def children_of(self, message_id: str) -> Self:
        """Direct children of a message (the branches under it), oldest first unless ordered otherwise."""
        return self.filter(parent_id=message_id).order_by("seq")

    def path(self, leaf_id: str | None = None) -> Self:
        """Root → leaf messages of ``leaf_id`` (the latest leaf when None), in order; one recursive query.

        Empty when the leaf is not in the session; on a stored parent cycle, the rows up to the first
        repeated one.  Chain ``filter``/``values``
        freely; ``order_by`` replaces the path order.
        """
        session_id = self._scope()
        if session_id is None:
            raise ValueError("path() walks one session: call for_session(session_id) first")
        if leaf_id is not None and (not isinstance(leaf_id, str) or "\x00" in leaf_id):
            raise ValueError("leaf_id must be a string without NUL characters")
        first_seen, params = walks.first_seen_path(connections[self.db].vendor, session_id, leaf_id)
        clone = self._chain()
        alias = self._join(clone, "agent_sessions_path", first_seen, params)
        return clone.order_by(JoinedColumn(alias, "n", models.IntegerField()).desc())

    def search(self, query: object) -> Self:
        """Messages matching ``query`` (the search language of agent_sessions.search.query), best first.

        Each row is annotated with ``rank`` (higher is better); ties go to the older
        message.  Restricted to the session when chained after ``for_session()``,
        which lets the index do the narrowing. A query past the search cost limits
        raises SearchTooComplex here, not when the queryset is evaluated.
        """
        parsed: Query = check_cost(as_query(query_terms(query)))
        if not parsed:
            return self.none()
        scope = self._scope()

        def ranked(connection) -> tuple[str, list]:
            from .storage import backends

            with connection.cursor() as cursor:  # the SQLite compiler probes its tokenizer
                return backends.for_vendor(connection.vendor).ranked_messages(cursor, parsed, scope)

        clone = self._chain()
        alias = self._join(clone, "agent_sessions_hits", ranked)
        return clone.annotate(rank=JoinedColumn(alias, "rank", models.FloatField())).order_by("-rank", "seq")

    @staticmethod
    def _join(queryset: models.QuerySet, name: str, sql: Any, params=()) -> str:
        query = queryset.query
        join = SubqueryJoin(name, query.get_initial_alias(), None, sql, params)
        return query.join(join, reuse=set())
