"""Migration operations for substring (CJK) search: trigram indexes per vendor."""

from __future__ import annotations

from ..storage import backends

_VENDORS = ("sqlite", "postgresql")


def install_trigram(apps, schema_editor) -> None:
    """Create the vendor's trigram index (FTS5 ``trigram`` tables, or pg_trgm GIN indexes)."""
    vendor = schema_editor.connection.vendor
    if vendor in _VENDORS:
        for statement in backends.for_vendor(vendor).trigram_install_sql():
            schema_editor.execute(statement)


def uninstall_trigram(apps, schema_editor) -> None:
    """Reverse of :func:`install_trigram`."""
    vendor = schema_editor.connection.vendor
    if vendor in _VENDORS:
        for statement in backends.for_vendor(vendor).TRIGRAM_UNINSTALL:
            schema_editor.execute(statement)
