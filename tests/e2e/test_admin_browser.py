"""The message tree in a real browser: headless Debian chromium driven by Playwright against ``live_server``.

Chromium comes from Debian (``apt-get install -y chromium``, done here when it
is missing); Playwright only drives it (``executable_path``), it never
downloads a browser. Without chromium or Playwright the test skips, except
under CI (``CI`` set), where it fails. Screenshots go to ``tests/artifacts/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.test_admin_data import branched_session

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]


def _unavailable(reason: str) -> None:
    """Fail under CI (the browser test must run there), skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _install_chromium() -> None:
    """``apt-get update && apt-get install -y chromium`` when we are root on a Debian-like system."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update"], env=env, check=False, timeout=900, capture_output=True)
    subprocess.run(["apt-get", "install", "-y", "chromium"], env=env, check=False, timeout=1800, capture_output=True)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        _install_chromium()
        path = shutil.which("chromium")
    if path is None:
        _unavailable("chromium is not installed and could not be installed with apt-get")
    return path


@pytest.fixture(scope="session")
def sync_playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright (Python) is not installed: see requirements-dev-extra.txt")
    return sync_playwright


@pytest.fixture
def staff(django_user_model):
    django_user_model.objects.create_superuser("admin", "admin@example.com", "e2e-password")
    return "admin", "e2e-password"


def test_tree_in_browser(live_server, staff, chromium_path, sync_playwright):
    # All database work happens before Playwright starts (its sync API runs an event loop in this thread).
    branched_session("chat-e2e")
    ARTIFACTS.mkdir(exist_ok=True)
    change_url = f"{live_server.url}/admin/agent_sessions/sessionrecord/chat-e2e/change/"

    with tempfile.TemporaryDirectory(prefix="as-chromium-") as profile, sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            profile, executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(f"{live_server.url}/admin/login/?next=/admin/agent_sessions/sessionrecord/chat-e2e/change/")
            page.fill("#id_username", staff[0])
            page.fill("#id_password", staff[1])
            page.click("input[type=submit]")
            page.wait_for_url(change_url)
            tree = page.locator("#as-tree")
            tree.wait_for()

            # Both branches are there: the selected one rendered, the other a stub under u2; both leaves listed.
            assert page.locator(".as-leaves a[data-leaf]").all_inner_texts() == ["a3", "a2b"]
            assert page.locator("#msg-u2 > .as-branches [data-branch='a2b']").count() == 1
            active = page.locator("#as-tree li.as-msg[data-active='true']").evaluate_all("els => els.map(e => e.id)")
            assert active == ["msg-u1", "msg-a1", "msg-u2", "msg-a2", "msg-u3", "msg-a3"]
            assert page.locator("li.as-selected").evaluate("e => e.id") == "msg-a3"
            # The active path is marked visibly: its left border uses the admin's --primary colour.
            border = page.locator("#msg-a2").evaluate("e => getComputedStyle(e).borderLeftColor")
            primary = page.evaluate(
                "() => { const d = document.createElement('div'); d.style.color = 'var(--primary)';"
                " document.body.appendChild(d); const c = getComputedStyle(d).color; d.remove(); return c; }"
            )
            assert border == primary

            # The compacted range shows its summary; originals and the tool call start collapsed.
            compaction = page.locator("li.as-compaction")
            assert "User asked about Kyoto weather" in compaction.inner_text()
            assert not page.locator("#msg-a1").is_visible()
            compaction.locator("details.as-originals > summary").click()
            page.locator("#msg-a1").wait_for(state="visible")
            tool = page.locator("#msg-a1 details.as-tool")
            assert not tool.locator("pre").first.is_visible()
            tool.locator("summary").click()
            assert tool.locator("pre").first.is_visible()
            assert '"tomorrow": "cloudy"' in tool.inner_text()

            # The other branch loads lazily when its stub opens.
            stub = page.locator("[data-branch='a2b'] > details > summary")
            stub.click(position={"x": 5, "y": 5})
            page.locator("#msg-a2b").wait_for(state="visible")
            assert "Alternative answer: sunny everywhere." in page.locator("#msg-a2b").inner_text()
            assert page.locator("#msg-a2b").get_attribute("data-active") is None
            page.locator("#as-tree").screenshot(path=str(ARTIFACTS / "admin-tree-light.png"))
            page.screenshot(path=str(ARTIFACTS / "admin-tree-light-page.png"), full_page=True)

            # Dark mode: the same page with prefers-color-scheme: dark (admin CSS variables follow it).
            page.emulate_media(color_scheme="dark")
            body_bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
            assert body_bg != "rgb(255, 255, 255)"
            page.locator("#as-tree").screenshot(path=str(ARTIFACTS / "admin-tree-dark.png"))
            page.emulate_media(color_scheme="light")

            # Selecting the other leaf shows that branch's history as the active path.
            page.locator("[data-branch='a2b'] .as-select-branch").click()
            page.wait_for_url("**leaf=a2b**")
            active = page.locator("#as-tree li.as-msg[data-active='true']").evaluate_all("els => els.map(e => e.id)")
            assert active == ["msg-u1", "msg-a1", "msg-u2", "msg-a2b"]
            assert page.locator("li.as-selected").evaluate("e => e.id") == "msg-a2b"
            assert page.locator("#msg-u2 > .as-branches [data-branch='a2']").count() == 1
            page.locator("#as-tree").screenshot(path=str(ARTIFACTS / "admin-tree-branch.png"))
        finally:
            browser.close()

    for name in ("admin-tree-light.png", "admin-tree-dark.png", "admin-tree-branch.png"):
        assert (ARTIFACTS / name).stat().st_size > 10_000
