"""SQLite: the message trigram index leaves out all-ASCII text (English appends skip its work)."""

from django.db import migrations

from agent_sessions.storage.search_schema import trigram_with_ascii_text, trigram_without_ascii_text


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0014_monotonic_updated_at")]

    operations = [migrations.RunPython(trigram_without_ascii_text, trigram_with_ascii_text, elidable=False)]
