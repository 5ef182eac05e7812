"""The test settings without "pgtrigger" in INSTALLED_APPS (migrations must still install the triggers)."""

from tests.settings import *  # noqa: F403

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "pgtrigger"]  # noqa: F405
