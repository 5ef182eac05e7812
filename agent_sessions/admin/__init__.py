"""Django admin of agent_sessions: sessions and their message trees, messages, overlays, compaction jobs,
context blocks, search entries and API keys.

Importing this package registers the ModelAdmins (Django's autodiscovery does).
"""

from . import api_keys, model_admins, sessions  # noqa: F401  (registration side effects)
