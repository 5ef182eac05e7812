"""Django set-up for running an example as a script: project settings, migrated database.

``DATABASE_URL`` picks the database (default: ``db.sqlite3`` in the repository).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def django() -> None:
    """Make the repository importable, set Django up and apply migrations."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django as dj

    dj.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
