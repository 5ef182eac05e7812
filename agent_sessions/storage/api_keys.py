"""The API-key lookup of every authenticated request: unrevoked keys by prefix, each with its owner."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.db import connections
from django.db.models import Model

from ..models import ApiKey


class KeyLookup:
    """``ApiKey.objects.select_related("owner").filter(prefix=…, revoked=False)`` compiled once.

    The ORM would compile that join again on every request (docs/performance.md, H1). Same columns,
    same converters (SQLite's text datetimes and integer booleans), the same two model instances.
    """

    def __init__(self, alias: str, user_model: type[Model]) -> None:
        connection = connections[alias]
        quote = connection.ops.quote_name
        self.alias = alias
        self.user_model = user_model
        key_fields, user_fields = ApiKey._meta.concrete_fields, user_model._meta.concrete_fields
        self.key_names = [f.attname for f in key_fields]
        self.user_names = [f.attname for f in user_fields]
        columns = [*(f.get_col("k") for f in key_fields), *(f.get_col("u") for f in user_fields)]
        #: (position, column, converters) of the values that need converting (most need none). The
        #: converters are the backend's and the fields' own, as the ORM's compiler would apply them.
        self.converters = [
            (index, column, converters)
            for index, column in enumerate(columns)
            if (converters := connection.ops.get_db_converters(column) + column.get_db_converters(connection))
        ]
        select = ", ".join(f"{column.alias}.{quote(column.target.column)}" for column in columns)
        owner, prefix, revoked = (quote(ApiKey._meta.get_field(name).column) for name in ("owner", "prefix", "revoked"))
        self.sql = (
            f"SELECT {select} FROM {quote(ApiKey._meta.db_table)} k"
            f" INNER JOIN {quote(user_model._meta.db_table)} u ON u.{quote(user_model._meta.pk.column)} = k.{owner}"
            f" WHERE k.{prefix} = %s AND k.{revoked} = %s"
        )

    def __call__(self, prefix: str) -> list[ApiKey]:
        """The unrevoked keys with this prefix, each with its owner attached."""
        connection = connections[self.alias]
        with connection.cursor() as cursor:
            cursor.execute(self.sql, [prefix, False])
            rows = cursor.fetchall()
        split = len(self.key_names)
        keys = []
        for row in rows:
            values = list(row)
            for index, column, converters in self.converters:
                for convert in converters:
                    values[index] = convert(values[index], column, connection)
            key = ApiKey.from_db(self.alias, self.key_names, values[:split])
            key.owner = self.user_model.from_db(self.alias, self.user_names, values[split:])
            keys.append(key)
        return keys


@lru_cache(maxsize=8)
def _lookup(alias: str, user_model: type[Model]) -> KeyLookup:
    return KeyLookup(alias, user_model)


def candidates(alias: str, user_model: Any, prefix: str) -> list[ApiKey]:
    """Unrevoked keys on ``alias`` whose token starts with ``prefix``, each with its owner (an instance
    of ``user_model``, the project's user model) loaded."""
    return _lookup(alias, user_model)(prefix)
