"""Running a migration step's SQL on the databases it is written for, and nowhere else."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

SQLITE = ("sqlite",)
POSTGRES = ("postgresql",)
BOTH = SQLITE + POSTGRES


def run_on(schema_editor, vendors: Collection[str], statements: Callable[[str], Iterable[str]]) -> None:
    """On a database of one of ``vendors``, run ``statements(vendor)`` (built only there), each
    verbatim: no placeholders, so a ``%`` in a function body or a date format is literal."""
    vendor = schema_editor.connection.vendor
    if vendor in vendors:
        for statement in statements(vendor):
            schema_editor.execute(statement, params=None)


def run_on_postgres(schema_editor, statements: Iterable[str]) -> None:
    """A migration step's statements (a function's install or drop), run on Postgres only."""
    run_on(schema_editor, POSTGRES, lambda _: statements)
