"""Django for an example run from the repository root (``python -m examples.<name>``): the demo project's
settings and a migrated database in a fresh temporary directory, so a run writes nothing into the
repository. ``DATABASE_URL`` picks another database (dj-database-url syntax).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def django() -> None:
    """Set Django up on ``project.settings`` and apply the migrations."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    if "DATABASE_URL" not in os.environ:
        folder = tempfile.mkdtemp(prefix="agent-sessions-example-")
        os.environ["DATABASE_URL"] = f"sqlite:///{folder}/example.sqlite3"
        print(f"(database: {folder}/example.sqlite3)")
    import django as dj

    dj.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
