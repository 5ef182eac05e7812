"""Load a small demo conversation (a branch, a compaction overlay, context blocks) and an admin login."""

from __future__ import annotations

import secrets
from typing import cast

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from agent_sessions.models import ContextBlockRecord, SessionRecord
from agent_sessions.session import Session
from agent_sessions.ui_message import UIMessage

DEMO_ID = "demo"


def _text(mid: str, role: str, text: str) -> UIMessage:
    return cast(UIMessage, {"id": mid, "role": role, "parts": [{"type": "text", "text": text}]})


class Command(BaseCommand):
    help = "Load the demo conversation and create (or reset) the demo admin login, printing it."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")
        parser.add_argument("--password", default=None, help="Default: a new random password, printed.")

    def handle(self, *args, username: str, password: str | None, **options):
        user_model = get_user_model()
        password = password or secrets.token_urlsafe(12)
        user, _ = user_model.objects.get_or_create(username=username, defaults={"email": f"{username}@example.com"})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()

        SessionRecord.objects.update_or_create(
            id=DEMO_ID, defaults={"name": "Demo: trip planning", "model": "demo-model", "source": "demo", "owner": user}
        )
        session = Session.create().for_session(DEMO_ID)
        session.clear_messages()
        conversation = [
            _text("u1", "user", "I want to plan a three-day trip to Kyoto in spring."),
            _text("a1", "assistant", "Great choice. Cherry blossoms peak in early April; shall I draft an itinerary?"),
            _text("u2", "user", "Yes, and I like temples and quiet gardens."),
            {
                "id": "a2",
                "role": "assistant",
                "parts": [
                    {"type": "text", "text": "Let me check the weather first."},
                    {
                        "type": "tool-weather",
                        "toolCallId": "call-1",
                        "state": "output-available",
                        "input": {"city": "Kyoto", "month": "April"},
                        "output": {"high_c": 19, "low_c": 8, "rain_days": 9},
                    },
                ],
            },
            _text("u3", "user", "What about day one?"),
            _text("a3", "assistant", "Day one: Nanzen-ji in the morning, the Philosopher's Path, Ginkaku-ji."),
            _text("u4", "user", "And day two?"),
            _text("a4", "assistant", "Day two: Arashiyama bamboo grove, Tenryu-ji garden, then Okochi Sanso."),
        ]
        for message in conversation:
            session.append_message(cast(UIMessage, message))
        # A branch: the user regenerates the answer to "And day two?".
        session.append_message(
            _text("a4b", "assistant", "Day two, alternative: Fushimi Inari at dawn, then Tofuku-ji."), "u4"
        )
        session.add_compaction(
            "## Topic\nA spring trip to Kyoto.\n## Key Points\n- Likes temples and quiet gardens.\n"
            "- Early April: 8–19 °C, some rain.",
            "u1",
            "a2",
        )
        ContextBlockRecord.objects.update_or_create(
            label=f"memory_{DEMO_ID}",
            defaults={"session_id": DEMO_ID, "content": "Prefers quiet places. Travels in spring."},
        )
        ContextBlockRecord.objects.update_or_create(
            label=f"soul_{DEMO_ID}",
            defaults={"session_id": DEMO_ID, "content": "You are a calm, precise travel assistant."},
        )
        self.stdout.write(self.style.SUCCESS(f"Demo session '{DEMO_ID}' loaded ({len(conversation) + 1} messages)."))
        self.stdout.write(f"Admin:    http://127.0.0.1:8000/admin/   user: {username}   password: {password}")
        self.stdout.write("API:      http://127.0.0.1:8000/api/     docs: http://127.0.0.1:8000/api/docs")
