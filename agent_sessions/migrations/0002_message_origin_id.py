# Records which original message a forked copy came from (SessionManager.fork).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agent_sessions', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='message',
            name='origin_id',
            field=models.TextField(blank=True, help_text='Id of the message this one was forked from.', null=True),
        ),
    ]
