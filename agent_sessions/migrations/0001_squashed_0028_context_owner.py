"""The schema as the old chain 0001-0028 left it, in one step: literal SQL per vendor (see ``_frozen``).

A database migrated by the old chain has every migration this one ``replaces`` recorded, so
Django records this one as applied without running it.  A fresh database gets the same schema
from ``_frozen_sql`` (written from a database the old chain migrated; tests/test_migrations.py
holds the two equal).  The migration state is the models', built by the operations below.
"""

import django.db.models.deletion
import django.db.models.functions.datetime
import django.utils.timezone
import pgtrigger.compiler
from django.conf import settings
from django.db import migrations, models

from . import _frozen


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ("agent_sessions", "0001_initial"),
        ("agent_sessions", "0002_message_origin_id"),
        ("agent_sessions", "0003_compactionjob"),
        ("agent_sessions", "0004_apikey"),
        ("agent_sessions", "0005_search_trigram"),
        ("agent_sessions", "0006_path_key_index"),
        ("agent_sessions", "0007_session_relations"),
        ("agent_sessions", "0008_session_triggers"),
        ("agent_sessions", "0009_message_tool_text"),
        ("agent_sessions", "0010_session_keys"),
        ("agent_sessions", "0011_compactionjob_heartbeat"),
        ("agent_sessions", "0012_search_session_fts"),
        ("agent_sessions", "0013_search_partial_trgm"),
        ("agent_sessions", "0014_monotonic_updated_at"),
        ("agent_sessions", "0015_sqlite_trigram_non_ascii"),
        ("agent_sessions", "0016_drop_duplicate_seq_index"),
        ("agent_sessions", "0017_sqlite_deferred_index"),
        ("agent_sessions", "0018_postgres_append_function"),
        ("agent_sessions", "0019_postgres_append_partitions_keep_plans"),
        ("agent_sessions", "0020_postgres_append_leaf_in_index_order"),
        ("agent_sessions", "0021_postgres_append_counts_its_row"),
        ("agent_sessions", "0022_drop_session_id_like_index"),
        ("agent_sessions", "0023_postgres_append_remembers_its_mode"),
        ("agent_sessions", "0024_postgres_append_takes_the_stamp"),
        ("agent_sessions", "0025_postgres_recent_window_function"),
        ("agent_sessions", "0026_postgres_path_function"),
        ("agent_sessions", "0027_postgres_window_function"),
        ("agent_sessions", "0028_context_owner"),
    ]

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunPython(_frozen.create_schema, _frozen.drop_schema, elidable=False),
            ],
            state_operations=[
                migrations.CreateModel(
                    name='ApiKey',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(blank=True, default='', max_length=100)),
                        ('prefix', models.CharField(db_index=True, editable=False, max_length=16)),
                        ('hashed_secret', models.CharField(editable=False, help_text='SHA-256 of the token (hex).', max_length=64, unique=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ('last_used_at', models.DateTimeField(blank=True, editable=False, null=True)),
                        ('revoked', models.BooleanField(default=False)),
                        ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='agent_session_api_keys', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'verbose_name': 'API key',
                        'db_table': 'agent_sessions_api_keys',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='ContextBlockRecord',
                    fields=[
                        ('label', models.TextField(primary_key=True, serialize=False)),
                        ('content', models.TextField(default='')),
                        ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), default=django.utils.timezone.now)),
                        ('session_id', models.TextField(blank=True, help_text="The owning session (NULL: no known owner, e.g. a foreign writer's row).", null=True)),
                    ],
                    options={
                        'verbose_name': 'context block',
                        'db_table': 'cf_agents_context_blocks',
                        'indexes': [models.Index(fields=['session_id'], name='cf_agents_blocks_owner_idx')],
                    },
                ),
                migrations.CreateModel(
                    name='SearchEntry',
                    fields=[
                        ('seq', models.BigAutoField(primary_key=True, serialize=False)),
                        ('label', models.TextField()),
                        ('key', models.TextField()),
                        ('content', models.TextField()),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), default=django.utils.timezone.now)),
                        ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), default=django.utils.timezone.now)),
                        ('session_id', models.TextField(blank=True, help_text="The owning session (NULL: no known owner, e.g. a foreign writer's row).", null=True)),
                    ],
                    options={
                        'verbose_name_plural': 'search entries',
                        'db_table': 'cf_agents_search_entries',
                        'indexes': [models.Index(fields=['session_id'], name='cf_agents_entries_owner_idx')],
                        'constraints': [models.UniqueConstraint(fields=('label', 'key'), name='cf_agents_search_entries_uniq')],
                    },
                ),
                migrations.CreateModel(
                    name='SessionRecord',
                    fields=[
                        ('id', models.TextField(primary_key=True, serialize=False)),
                        ('name', models.TextField(db_default='', default='')),
                        ('parent_session_id', models.TextField(blank=True, null=True)),
                        ('model', models.TextField(blank=True, null=True)),
                        ('source', models.TextField(blank=True, null=True)),
                        ('input_tokens', models.BigIntegerField(db_default=0, default=0)),
                        ('output_tokens', models.BigIntegerField(db_default=0, default=0)),
                        ('estimated_cost', models.FloatField(db_default=0, default=0)),
                        ('end_reason', models.TextField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), default=django.utils.timezone.now)),
                        ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), db_index=True, default=django.utils.timezone.now)),
                        ('message_count', models.BigIntegerField(db_default=0, default=0, editable=False, help_text='Stored messages (every branch), kept by triggers.')),
                        ('owner', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='agent_sessions', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'verbose_name': 'session',
                        'db_table': 'assistant_sessions',
                        'ordering': ['-updated_at'],
                    },
                ),
                migrations.CreateModel(
                    name='Message',
                    fields=[
                        ('seq', models.BigAutoField(primary_key=True, serialize=False)),
                        ('message_id', models.TextField(db_column='id')),
                        ('parent_id', models.TextField(blank=True, null=True)),
                        ('role', models.TextField()),
                        ('content', models.TextField(help_text='The UIMessage as JSON.')),
                        ('text_content', models.TextField(blank=True, db_default='', default='')),
                        ('tool_text', models.TextField(blank=True, db_default='', default='')),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), default=django.utils.timezone.now)),
                        ('depth', models.IntegerField(blank=True, help_text='1 for a root.', null=True)),
                        ('tokens', models.IntegerField(blank=True, help_text='Estimated tokens of this message.', null=True)),
                        ('path_tokens', models.BigIntegerField(blank=True, help_text='Estimated tokens from the root to this message, inclusive.', null=True)),
                        ('origin_id', models.TextField(blank=True, help_text='Id of the message this one was forked from.', null=True)),
                        ('session', models.ForeignKey(db_column='session_id', db_constraint=False, db_default='', db_index=False, default='', on_delete=django.db.models.deletion.DO_NOTHING, related_name='messages', to='agent_sessions.sessionrecord')),
                    ],
                    options={
                        'db_table': 'assistant_messages',
                        'ordering': ['seq'],
                    },
                ),
                migrations.CreateModel(
                    name='CompactionJob',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
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
                        ('holder', models.TextField(blank=True, default='', help_text='Who runs it: host:pid:start-time:task (empty when no run holds the lease).')),
                        ('heartbeat_at', models.DateTimeField(blank=True, help_text='Last sign of life of the running holder.', null=True)),
                        ('enqueued_at', models.DateTimeField(blank=True, help_text='When the pending request reached the broker (empty: not published yet).', null=True)),
                        ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('session', models.OneToOneField(db_column='session_id', db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='compaction_job', to='agent_sessions.sessionrecord')),
                    ],
                    options={
                        'verbose_name': 'compaction job',
                        'db_table': 'agent_sessions_compaction_jobs',
                        'ordering': ['-updated_at'],
                    },
                ),
                migrations.CreateModel(
                    name='Compaction',
                    fields=[
                        ('seq', models.BigAutoField(primary_key=True, serialize=False)),
                        ('compaction_id', models.TextField(db_column='id')),
                        ('summary', models.TextField()),
                        ('from_message_id', models.TextField()),
                        ('to_message_id', models.TextField()),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), default=django.utils.timezone.now)),
                        ('session', models.ForeignKey(db_column='session_id', db_constraint=False, db_default='', db_index=False, default='', on_delete=django.db.models.deletion.DO_NOTHING, related_name='compactions', to='agent_sessions.sessionrecord')),
                    ],
                    options={
                        'db_table': 'assistant_compactions',
                        'ordering': ['seq'],
                    },
                ),
                _frozen.AddTrigger(
                    model_name='sessionrecord',
                    trigger=pgtrigger.compiler.Trigger(name='cascade_session_delete', sql=pgtrigger.compiler.UpsertTriggerSql(func="\n    DELETE FROM assistant_messages AS t USING old_sessions AS o WHERE o.id <> '' AND t.session_id = o.id;\n    DELETE FROM assistant_compactions AS t USING old_sessions AS o WHERE o.id <> '' AND t.session_id = o.id;\n    DELETE FROM agent_sessions_compaction_jobs AS t USING old_sessions AS o\n        WHERE o.id <> '' AND t.session_id = o.id;\n    DELETE FROM cf_agents_context_blocks AS t USING old_sessions AS o\n        WHERE o.id <> '' AND t.session_id = o.id;\n    DELETE FROM cf_agents_context_blocks AS t USING old_sessions AS o\n        WHERE o.id <> '' AND t.session_id IS NULL AND t.label = '_system_prompt_' || o.id;\n    DELETE FROM cf_agents_search_entries AS t USING old_sessions AS o\n        WHERE o.id <> '' AND t.session_id = o.id;\n    RETURN NULL;\n", hash='5f5783dab65895f9d18c9d4cd286d0aecde01984', level='STATEMENT', operation='DELETE', pgid='pgtrigger_cascade_session_delete_5b79f', referencing='REFERENCING OLD TABLE AS old_sessions ', table='assistant_sessions', when='AFTER')),
                ),
                _frozen.AddTrigger(
                    model_name='sessionrecord',
                    trigger=pgtrigger.compiler.Trigger(name='count_existing_messages', sql=pgtrigger.compiler.UpsertTriggerSql(func='NEW.message_count := (SELECT count(*) FROM assistant_messages WHERE session_id = NEW.id); RETURN NEW;', hash='5cc25a217643042c7eabfa80a4eeb224f78e4f4d', operation='INSERT', pgid='pgtrigger_count_existing_messages_cc79d', table='assistant_sessions', when='BEFORE')),
                ),
                migrations.AddIndex(
                    model_name='message',
                    index=models.Index(fields=['session_id', 'parent_id'], name='assistant_msg_sess_parent'),
                ),
                migrations.AddIndex(
                    model_name='message',
                    index=models.Index(fields=['session_id', 'seq'], name='assistant_msg_sess_seq'),
                ),
                migrations.AddConstraint(
                    model_name='message',
                    constraint=models.UniqueConstraint(fields=('session_id', 'message_id'), name='assistant_messages_session_id_uniq'),
                ),
                _frozen.AddTrigger(
                    model_name='message',
                    trigger=pgtrigger.compiler.Trigger(name='protect_message_tree', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.session_id IS DISTINCT FROM NEW.session_id OR OLD.parent_id IS DISTINCT FROM NEW.parent_id)', func="RAISE EXCEPTION 'agent_sessions: the id, session_id and parent_id of a stored message never change' USING ERRCODE = 'integrity_constraint_violation';", hash='c7822d9a064920b015164aa8e6c7fa23deddc696', operation='UPDATE OF "id", "session_id", "parent_id"', pgid='pgtrigger_protect_message_tree_20d65', table='assistant_messages', when='BEFORE')),
                ),
                _frozen.AddTrigger(
                    model_name='message',
                    trigger=pgtrigger.compiler.Trigger(name='count_inserted_messages', sql=pgtrigger.compiler.UpsertTriggerSql(condition="WHEN (current_setting('agent_sessions.counted_by_append', true) IS DISTINCT FROM 'on')", func='\n    UPDATE assistant_sessions AS s SET message_count = greatest(s.message_count + n.c, 0),\n        updated_at = greatest(s.updated_at, clock_timestamp())\n    FROM (SELECT session_id, count(*) AS c FROM new_messages GROUP BY session_id) AS n WHERE s.id = n.session_id;\n    RETURN NULL;\n', hash='a594d7b2f4d5d88505e4d1b4bd9b317ed7794a46', level='STATEMENT', operation='INSERT', pgid='pgtrigger_count_inserted_messages_cf7ea', referencing='REFERENCING NEW TABLE AS new_messages ', table='assistant_messages', when='AFTER')),
                ),
                _frozen.AddTrigger(
                    model_name='message',
                    trigger=pgtrigger.compiler.Trigger(name='count_deleted_messages', sql=pgtrigger.compiler.UpsertTriggerSql(func='\n    UPDATE assistant_sessions AS s SET message_count = greatest(s.message_count - n.c, 0),\n        updated_at = greatest(s.updated_at, clock_timestamp())\n    FROM (SELECT session_id, count(*) AS c FROM old_messages GROUP BY session_id) AS n WHERE s.id = n.session_id;\n    RETURN NULL;\n', hash='434160c3cad9cb3e9f6f3669d4187949d8ba5c9b', level='STATEMENT', operation='DELETE', pgid='pgtrigger_count_deleted_messages_9b7d6', referencing='REFERENCING OLD TABLE AS old_messages ', table='assistant_messages', when='AFTER')),
                ),
                migrations.AddIndex(
                    model_name='compaction',
                    index=models.Index(fields=['session_id', 'seq'], name='assistant_cmp_session'),
                ),
                migrations.AddConstraint(
                    model_name='compaction',
                    constraint=models.UniqueConstraint(fields=('session_id', 'compaction_id'), name='assistant_compactions_session_id_uniq'),
                ),
            ],
        ),
    ]
