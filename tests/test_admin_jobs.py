"""The admin's compaction jobs: lease holder and expiry shown, stuck jobs reset by staff."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agent_sessions import tasks as jobs
from agent_sessions.models import CompactionJob

pytestmark = pytest.mark.django_db

URL = "/admin/agent_sessions/compactionjob/"


@pytest.fixture
def stuck(session_id):
    token = jobs.acquire_lease(session_id, config_name="tests-fast", label="task-1234")
    job = CompactionJob.objects.get(session_id=session_id)
    assert job.status == "running"
    return job, token


def test_the_changelist_shows_holder_lease_and_heartbeat(admin_client, stuck):
    job, token = stuck
    html = admin_client.get(URL).content.decode()
    assert token in html
    assert ":task-1234" in html
    assert "lease until" in html.lower()
    assert "heartbeat at" in html.lower()


def test_staff_reset_a_stuck_job_and_the_dead_run_cannot_record_over_it(admin_client, stuck):
    job, token = stuck
    response = admin_client.post(URL, {"action": "reset_jobs", "_selected_action": [job.pk]}, follow=True)
    assert response.status_code == 200
    assert "Reset 1 compaction job" in response.content.decode()
    job.refresh_from_db()
    assert job.status == "idle"
    assert job.holder == ""
    assert job.lease_until is None
    assert job.last_error.startswith("reset by admin")
    assert not jobs.release_lease(job.session_id, token, status="succeeded")  # the old run's release misses
    assert jobs.acquire_lease(job.session_id) is not None  # free for the next run


def test_staff_without_change_permission_cannot_reset(client, django_user_model, stuck):
    from django.contrib.auth.models import Permission

    job, _ = stuck
    viewer = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_compactionjob"))
    client.force_login(viewer)
    assert "reset_jobs" not in client.get(URL).content.decode()
    client.post(URL, {"action": "reset_jobs", "_selected_action": [job.pk]})
    job.refresh_from_db()
    assert job.status == "running"
    assert job.lease_until > timezone.now() - timedelta(seconds=1)
