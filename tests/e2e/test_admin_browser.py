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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.admin_data import branched_session

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
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
    from playwright.sync_api import sync_playwright

    return sync_playwright


@pytest.fixture
def staff(django_user_model):
    django_user_model.objects.create_superuser("admin", "admin@example.com", "e2e-password")
    return "admin", "e2e-password"


@contextmanager
def admin_page(live_server, staff, chromium_path, sync_playwright, session_id: str, *, timeout: int) -> Iterator[Any]:
    """A headless chromium page logged in as ``staff``, on the session's change page."""
    change = f"{live_server.url}/admin/agent_sessions/sessionrecord/{session_id}/change/"
    with tempfile.TemporaryDirectory(prefix="as-chromium-") as profile, sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            profile,
            executable_path=chromium_path,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(timeout)
            page.goto(f"{live_server.url}/admin/login/?next=/admin/agent_sessions/sessionrecord/{session_id}/change/")
            page.fill("#id_username", staff[0])
            page.fill("#id_password", staff[1])
            page.click("input[type=submit]")
            page.wait_for_url(change)
            yield page
        finally:
            browser.close()


def test_tree_in_browser(live_server, staff, chromium_path, sync_playwright):
    # All database work happens before Playwright starts (its sync API runs an event loop in this thread).
    branched_session("chat-e2e")
    ARTIFACTS.mkdir(exist_ok=True)

    with admin_page(live_server, staff, chromium_path, sync_playwright, "chat-e2e", timeout=20_000) as page:
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

    for name in ("admin-tree-light.png", "admin-tree-dark.png", "admin-tree-branch.png"):
        assert (ARTIFACTS / name).stat().st_size > 10_000


# ── The operator's 10,000-message session ───────────────────────────────────────────────────────────────
CONTRAST_SELECTORS = (
    ".as-role, .as-badge, .as-quiet, .as-id, .as-tokens, .as-text, .as-msg-actions a, .as-snippet, .as-snippet mark,"
    " .as-excerpt, .as-warn, .as-leaves a, .as-originals > summary, details.as-more > summary, .as-facts dd"
)
CONTRAST_JS = """
(selectors) => {
  const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(',').map(parseFloat); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const over = (top, base) => ({r: top.r * top.a + base.r * (1 - top.a), g: top.g * top.a + base.g * (1 - top.a),
    b: top.b * top.a + base.b * (1 - top.a), a: 1});
  const lin = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  const lum = (c) => { const f = lin;
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const background = (el) => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; } }
    let base = {r: 255, g: 255, b: 255, a: 1};
    for (let i = layers.length - 1; i >= 0; i--) base = over(layers[i], base);
    return base; };
  const out = [];
  for (const el of document.querySelectorAll(selectors)) {
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height || !el.textContent.trim()) continue;
    const bg = background(el); const fg = over(parse(getComputedStyle(el).color), bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    out.push({what: el.tagName.toLowerCase() + '.' + el.className, text: el.textContent.trim().slice(0, 24),
      ratio: (hi + 0.05) / (lo + 0.05)});
  }
  return out;
}
"""


def _contrast_failures(page) -> tuple[list[dict], int]:
    measured = page.evaluate(CONTRAST_JS, CONTRAST_SELECTORS)
    return [m for m in measured if m["ratio"] < 4.5], len(measured)


def test_operator_finds_answers_in_a_10k_session(live_server, staff, chromium_path, sync_playwright):
    from tests.support.admin_data import BIG_RANGE, NEEDLE_AT, UMBRELLA_EVERY, operator_session

    ops = operator_session("ops")  # before Playwright starts (its sync API runs an event loop in this thread)
    umbrellas = len(range(0, ops["main_len"], UMBRELLA_EVERY))
    ARTIFACTS.mkdir(exist_ok=True)

    with admin_page(live_server, staff, chromium_path, sync_playwright, "ops", timeout=30_000) as page:
        assert page.locator("[data-stat='leaves']").inner_text() == "13"

        # The leaf list shows excerpt, role and time, and the selected leaf is scrolled into its box.
        leaf_item = page.locator(".as-leaves .as-selected-leaf")
        assert f"{ops['leaf']} notes on the rail timetable" in leaf_item.inner_text()
        assert leaf_item.locator("time").count() == 1
        assert leaf_item.locator(".as-role").inner_text() == "ASSISTANT"
        inside = page.evaluate(
            "() => { const i = document.querySelector('.as-leaves .as-selected-leaf'); const b = i.closest('ul');"
            " const r = i.getBoundingClientRect(), s = b.getBoundingClientRect();"
            " return r.top >= s.top - 1 && r.bottom <= s.bottom + 1; }"
        )
        assert inside

        # Jump to a message 9,000 deep: type its id (1), submit (2).
        page.fill("[data-jump='message'] input[name='focus']", "m9050")
        page.press("[data-jump='message'] input[name='focus']", "Enter")
        page.wait_for_url("**focus=m9050**")
        target = page.locator("#msg-m9050")
        assert target.is_visible()
        assert "as-focus" in target.get_attribute("class")
        assert page.evaluate(
            "() => { const r = document.getElementById('msg-m9050').getBoundingClientRect();"
            " return r.top > -2 && r.top < innerHeight; }"
        )
        assert "Context of user message m9050" in page.locator("#as-context > summary").inner_text()
        page.screenshot(path=str(ARTIFACTS / "admin-ops-jump-9000.png"))

        # Search the session with a true total, and page through the hits.
        page.fill("[data-jump='search'] input[name='q']", "umbrella")
        page.press("[data-jump='search'] input[name='q']", "Enter")
        page.wait_for_url("**q=umbrella**")
        assert page.locator("[data-stat='hits']").inner_text() == f"{umbrellas} messages match"
        assert page.locator(".as-hit-list > li").count() == 20
        page.locator("#as-hits").screenshot(path=str(ARTIFACTS / "admin-ops-search.png"))
        page.locator("#as-hits .as-pages a", has_text="2").first.click()
        page.wait_for_url("**hits=2**")
        assert page.locator(".as-hit-list > li").count() == 20
        assert page.locator(".as-hit-list").get_attribute("start") == "21"

        # A hit inside the 4,000-message compacted range: search (1), click the hit (2) opens the range at it.
        page.fill("[data-jump='search'] input[name='q']", "zebracrossing")
        page.press("[data-jump='search'] input[name='q']", "Enter")
        page.wait_for_url("**q=zebracrossing**")
        assert page.locator("[data-stat='hits']").inner_text() == "1 message matches"
        page.locator(".as-hit-link", has_text=f"m{NEEDLE_AT}").click()
        page.wait_for_url(f"**focus=m{NEEDLE_AT}**")
        hit = page.locator(f"#msg-m{NEEDLE_AT}")
        hit.wait_for(state="visible")
        assert "zebracrossing" in hit.inner_text()
        assert page.locator("[data-compaction-id='ops-big'] > details.as-originals").get_attribute("open") == ""
        panel = page.locator("#as-context").inner_text()
        assert "ops-big" in panel
        assert "You are a careful rail assistant." in panel
        page.screenshot(path=str(ARTIFACTS / "admin-ops-range-hit.png"))

        # The rest of the range loads 500 rows at a time, not 50 per click.
        before = page.locator("[data-compaction-id='ops-big'] li.as-msg").count()
        page.locator("[data-compaction-id='ops-big'] .as-continuation:not(:first-child) .as-load-large").click()
        rows_js = "document.querySelectorAll(\"[data-compaction-id='ops-big'] li.as-msg\").length"
        page.wait_for_function(f"() => {rows_js} >= {before + 500}")
        last_loaded = NEEDLE_AT - 10 + 50 + 500 - 1
        assert page.locator(f"#msg-m{last_loaded}").count() == 1
        assert last_loaded < BIG_RANGE[1]

        # The huge summary is cut; "show all" loads its rest in a bounded, scrolling box.
        summary = page.locator("[data-compaction-id='ops-big'] > details.as-more")
        assert page.locator("[data-compaction-id='ops-big'] > .as-summary").bounding_box()["height"] < 900
        summary.locator("summary").click()
        summary.locator(".as-rest").wait_for()
        assert summary.bounding_box()["height"] < 1200

        # The context panel of an answer: open "context" on an assistant row.
        page.locator(f"#msg-m{NEEDLE_AT + 2} .as-context-link").click()
        page.wait_for_url(f"**focus=m{NEEDLE_AT + 2}**")
        context = page.locator("#as-context")
        text = context.inner_text()
        assert f"Context of assistant message m{NEEDLE_AT + 2}" in text
        assert "SOUL [readonly]" in text
        assert "written after this message" in text
        assert context.locator("[data-context='parent']").inner_text() == f"m{NEEDLE_AT + 1}"
        context.screenshot(path=str(ARTIFACTS / "admin-ops-context.png"))

        # Contrast (WCAG AA, 4.5:1) of badges, rows and the highlighted row, in both themes.
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            page.wait_for_timeout(600)  # the admin's links fade their colour in (a 0.15 s transition)
            failures, measured = _contrast_failures(page)
            assert measured > 100, (scheme, measured)
            assert not failures, (scheme, failures[:10])
            roles = page.locator("li.as-focus > .as-msg-head > .as-role")
            assert roles.evaluate("e => getComputedStyle(e).backgroundColor") != roles.evaluate(
                "e => getComputedStyle(e.closest('li')).backgroundColor"
            )
            page.screenshot(path=str(ARTIFACTS / f"admin-ops-{scheme}.png"))
        page.emulate_media(color_scheme="light")

    for name in (
        "admin-ops-jump-9000.png",
        "admin-ops-search.png",
        "admin-ops-range-hit.png",
        "admin-ops-context.png",
        "admin-ops-light.png",
        "admin-ops-dark.png",
    ):
        assert (ARTIFACTS / name).stat().st_size > 10_000


def test_model_call_pages_in_browser(live_server, staff, chromium_path, sync_playwright):
    """From the session page: a reply's model input, the comparison with its regeneration, the call timeline."""
    from tests.support.admin_data import recorded_session

    recorded_session("calls-e2e", "E2E")
    ARTIFACTS.mkdir(exist_ok=True)
    base = f"{live_server.url}/admin/agent_sessions/sessionrecord/calls-e2e"
    with admin_page(live_server, staff, chromium_path, sync_playwright, "calls-e2e", timeout=20_000) as page:
        page.locator("#msg-a4b a[data-model-input]").click()
        page.wait_for_selector("[data-model-input-page]")
        assert page.locator("[data-field='model']").inner_text() == "gpt-b"
        assert page.locator("li[data-summary='true']").count() == 2
        assert page.locator("li[data-sent]").count() == 3  # two summaries, then u3
        page.screenshot(path=str(ARTIFACTS / "admin-model-input.png"), full_page=True)
        page.locator("[data-sibling='a4'] a[data-compare]").click()
        page.wait_for_selector("[data-compare-page]")
        assert page.locator("section.as-diff").count() == 5
        assert page.locator("section.as-diff ins").count() > 0
        page.screenshot(path=str(ARTIFACTS / "admin-model-compare.png"), full_page=True)
        page.goto(f"{base}/model-calls/")
        assert page.locator("tr[data-call]").count() == 3
        page.locator("a[data-preset='expensive']").click()
        page.wait_for_selector("[data-totals]")
        assert page.locator("tr[data-call]").count() == 1
        page.screenshot(path=str(ARTIFACTS / "admin-model-calls.png"), full_page=True)
