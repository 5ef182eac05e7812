"""Stable keys for keyed writes (skill and search entries) through ``set_context``.

With a title the key is its slug, so rewriting an entry with the same title
replaces it.  Without one the key is ``slug-hash`` of the content; the hash keeps
different texts apart even when their slugs agree or are empty (non-Latin text).
"""

from __future__ import annotations

import hashlib
import re

_RUN = re.compile(r"[a-z0-9]+")
SLUG_SOURCE_CHARS = 60
HASH_CHARS = 12


def slugify(text: str) -> str:
    """Lower-case ``a-z0-9`` runs of the first 60 characters, joined by ``-``."""
    return "-".join(_RUN.findall(text[:SLUG_SOURCE_CHARS].lower()))


def short_hash(text: str) -> str:
    """A short, stable hex digest of ``text``."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def entry_key(content: str, title: str | None = None) -> str:
    """The key of an entry: slug of ``title``; else ``slug-hash`` of ``content``; ``entry-<hash>`` if no slug."""
    if title is not None and title.strip():
        return slugify(title) or f"entry-{short_hash(title)}"
    slug = slugify(content)
    return f"{slug}-{short_hash(content)}" if slug else f"entry-{short_hash(content)}"
