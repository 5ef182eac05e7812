"""Skills as files in any Django ``Storage`` (the Python counterpart of the seed's ``R2SkillProvider``).

Each skill is the file ``<prefix><key>``; its optional one-line description is
a sidecar file ``<prefix><key>.description`` (sidecars work on every backend,
local disk and django-storages' S3 alike, where custom object metadata does not).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from django.core.files.base import ContentFile
from django.core.files.storage import Storage, default_storage

DESCRIPTION_SUFFIX = ".description"


class StorageSkillProvider:
    """A skill block: ``get()`` lists ``- key: description``, ``load(key)`` reads a file, ``set`` writes one.

    ``keys`` is an optional allow-list: only those skills are listed, loaded or written.
    """

    def __init__(self, storage: Storage | None = None, *, prefix: str = "", keys: Iterable[str] | None = None) -> None:
        self.storage = storage if storage is not None else default_storage
        self.prefix = prefix
        self.keys = None if keys is None else list(keys)

    def __repr__(self) -> str:
        return f"StorageSkillProvider(prefix={self.prefix!r})"

    # ── paths ───────────────────────────────────────────────────────
    def _valid(self, key: object) -> bool:
        if not isinstance(key, str) or not key or "\x00" in key or key.startswith("/") or "\\" in key:
            return False
        if key.endswith(DESCRIPTION_SUFFIX) or any(part in {"", ".", ".."} for part in key.split("/")):
            return False
        return self.keys is None or key in self.keys

    def _path(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def _read(self, path: str) -> str | None:
        if not self.storage.exists(path):
            return None
        with self.storage.open(path, "rb") as handle:
            return handle.read().decode("utf-8")

    def _write(self, path: str, text: str) -> None:
        # Storage.save() never overwrites (it picks a free name), so delete first.
        if self.storage.exists(path):
            self.storage.delete(path)
        saved = self.storage.save(path, ContentFile(text.encode("utf-8")))
        if saved != path:
            raise OSError(f"storage saved {path!r} as {saved!r}")

    def _walk(self, directory: str) -> list[str]:
        try:
            dirs, files = self.storage.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = [posixpath.join(directory, name) if directory else name for name in files]
        for sub in dirs:
            found.extend(self._walk(posixpath.join(directory, sub) if directory else sub))
        return found

    def available_keys(self) -> list[str]:
        """Keys of the stored skills (allow-listed ones only), sorted."""
        if self.keys is not None:
            return [k for k in self.keys if self._valid(k) and self.storage.exists(self._path(k))]
        directory, _, name_prefix = self.prefix.rpartition("/")
        keys = [
            path[len(self.prefix) :]
            for path in self._walk(directory)
            if path.startswith(self.prefix) and not path.endswith(DESCRIPTION_SUFFIX)
        ]
        return sorted(k for k in keys if self._valid(k))

    # ── SkillProvider ───────────────────────────────────────────────
    def get(self) -> str:
        """The metadata listing rendered into the prompt: ``- key: description`` per skill."""
        lines = []
        for key in self.available_keys():
            description = (self._read(self._path(key) + DESCRIPTION_SUFFIX) or "").strip()
            lines.append(f"- {key}: {description}" if description else f"- {key}")
        return "\n".join(lines)

    def load(self, key: str) -> str | None:
        """The full text of a skill, or None when it does not exist (or is not allowed)."""
        if not self._valid(key):
            return None
        return self._read(self._path(key))

    def set(self, key: str, content: str, description: str | None = None) -> None:
        """Write a skill (and its description when given)."""
        if not self._valid(key):
            raise ValueError(f"invalid or not allowed skill key: {key!r}")
        self._write(self._path(key), content)
        if description is not None:
            self._write(self._path(key) + DESCRIPTION_SUFFIX, description)

    def delete(self, key: str) -> bool:
        """Remove a skill and its description; True if it existed."""
        if not self._valid(key) or not self.storage.exists(self._path(key)):
            return False
        self.storage.delete(self._path(key))
        if self.storage.exists(self._path(key) + DESCRIPTION_SUFFIX):
            self.storage.delete(self._path(key) + DESCRIPTION_SUFFIX)
        return True
