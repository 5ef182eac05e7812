"""``manage.py create_api_key <username> [--name NAME]``: issue a JSON API key and print its token once."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agent_sessions.exceptions import InvalidText
from agent_sessions.models import ApiKey


class Command(BaseCommand):
    help = "Create an API key for a user and print the token (it is not stored and cannot be shown again)."

    def add_arguments(self, parser):
        parser.add_argument("username", help="The key acts as this user (it sees the user's sessions).")
        parser.add_argument("--name", default="", help="A label for the key, shown in the admin.")

    def handle(self, *args, username: str, name: str, **options):
        user_model = get_user_model()
        try:
            user = user_model.objects.get(**{user_model.USERNAME_FIELD: username})
        except user_model.DoesNotExist:
            raise CommandError(f"No user named {username!r}.") from None
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive; its keys would be refused.")
        try:
            key, token = ApiKey.issue(user, name)
        except InvalidText as exc:
            raise CommandError(f"--name: {exc}") from None
        self.stderr.write(f"Created API key {key.prefix}… ({name or 'unnamed'}) for {username}. Store the token now:")
        self.stdout.write(token)
