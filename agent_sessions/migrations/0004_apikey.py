import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("agent_sessions", "0003_compactionjob"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiKey",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(blank=True, default="", max_length=100)),
                ("prefix", models.CharField(db_index=True, editable=False, max_length=16)),
                (
                    "hashed_secret",
                    models.CharField(
                        editable=False, help_text="SHA-256 of the token (hex).", max_length=64, unique=True
                    ),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                ("last_used_at", models.DateTimeField(blank=True, editable=False, null=True)),
                ("revoked", models.BooleanField(default=False)),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="agent_session_api_keys",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "API key",
                "db_table": "agent_sessions_api_keys",
                "ordering": ["-created_at"],
            },
        ),
    ]
