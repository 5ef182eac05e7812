# Auto-compaction job state: one row per session (lease, attempts, last error).

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0002_message_origin_id'),
    ]

    operations = [
        migrations.CreateModel(
            name='CompactionJob',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('session_id', models.TextField(unique=True)),
                ('config_name', models.TextField(blank=True, default='', help_text='Registry name; empty for inline (ad-hoc) runs.')),
                ('leaf_id', models.TextField(blank=True, help_text='Leaf the last request asked for (None: latest).', null=True)),
                ('force', models.BooleanField(default=False, help_text='Compact even under the threshold (a manual request).')),
                ('status', models.CharField(choices=[('pending', 'pending'), ('running', 'running'), ('succeeded', 'succeeded'), ('failed', 'failed'), ('idle', 'idle')], db_index=True, default='idle', max_length=16)),
                ('attempts', models.IntegerField(default=0, help_text='Runs since the last request.')),
                ('last_error', models.TextField(blank=True, default='')),
                ('requested_at', models.DateTimeField(blank=True, null=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('lease_until', models.DateTimeField(blank=True, null=True)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'verbose_name': 'compaction job',
                'db_table': 'agent_sessions_compaction_jobs',
                'ordering': ['-updated_at'],
            },
        ),
    ]
