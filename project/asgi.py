"""ASGI entry point of the demo project (uvicorn serves it: chat replies stream chunk by chunk)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

application = get_asgi_application()
