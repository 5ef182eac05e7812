"""The demo's chat: ChatView on a fake model, and a minimal page that talks to it with the ai client.

Log in at ``/admin/`` first (``manage.py load_demo`` prints a login); the page posts to ``/api/chat``
with the session cookie and the CSRF token. The fake model streams a reasoning part and an echo of
the question word by word; ask about the weather and it calls the client-side tool ``getLocation``,
which the page answers, and the reply continues in the same message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token

AI_VERSION = "6.0.333"  # the version tests/js/chat pins


def _text(message: dict) -> str:
    return " ".join(p.get("text", "") for p in message.get("parts", []) if p.get("type") == "text")


async def fake_model(session: Any, history: list[dict]) -> AsyncIterator[Any]:
    """A stand-in for a real model (see docs/chat.md for openai_chunks / anthropic_chunks)."""
    last = history[-1]
    if last["role"] == "assistant":  # the page sent getLocation's output back
        outputs = [p.get("output") for p in last["parts"] if p.get("type") == "tool-getLocation"]
        yield f"It is sunny in {outputs[-1] if outputs else 'your town'}."
        return
    question = _text(last)
    yield {"type": "reasoning-start", "id": "r"}
    yield {"type": "reasoning-delta", "id": "r", "delta": f"The user said {len(question.split())} words."}
    yield {"type": "reasoning-end", "id": "r"}
    if "weather" in question.lower():
        call = {"toolCallId": f"loc-{last['id']}", "toolName": "getLocation", "input": {}}
        yield {"type": "tool-input-available", **call}
        return
    for word in f"You said: {question}".split():
        await asyncio.sleep(0.05)
        yield word + " "


PAGE = """<!doctype html>
<meta charset="utf-8">
<title>agent_sessions chat</title>
<style>
 body { font: 15px system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; }
 .m { margin: .5rem 0; white-space: pre-wrap } .user { color: #035 } .assistant { color: #333 }
 .reasoning { color: #888; font-style: italic } .tool { color: #850 }
</style>
<h1>Chat</h1>
<p>Messages are stored in session <code id="sid"></code>: see it in the <a href="/admin/">admin</a>.</p>
<div id="log"></div>
<form id="f"><input id="q" size="60" placeholder="Say something (try: weather)" autofocus>
<button>Send</button> <button type="button" id="regen">Regenerate</button></form>
<script type="module">
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls }
  from "https://esm.sh/ai@__AI_VERSION__";
const render = () => {
  document.getElementById("log").innerHTML = "";
  for (const m of chat.messages) for (const p of m.parts) {
    const div = document.createElement("div");
    div.className = "m " + m.role;
    if (p.type === "text") div.textContent = `${m.role}: ${p.text}`;
    else if (p.type === "reasoning") { div.className += " reasoning"; div.textContent = p.text; }
    else if (p.type.startsWith("tool-")) { div.className += " tool"; div.textContent = `${p.type} ${p.state}`; }
    else continue;
    document.getElementById("log").append(div);
  }
  if (chat.error) document.getElementById("log").append(`error: ${chat.error.message}`);
};
class State {
  messages = []; status = "ready"; error = undefined;
  pushMessage = m => { this.messages = [...this.messages, m]; render(); };
  popMessage = () => { this.messages = this.messages.slice(0, -1); render(); };
  replaceMessage = (i, m) => { this.messages = this.messages.map((x, j) => (j === i ? m : x)); render(); };
  snapshot = v => structuredClone(v);
}
class Chat extends AbstractChat { constructor(init) { super({ ...init, state: new State() }); } }
const chat = new Chat({
  transport: new DefaultChatTransport({ api: "/api/chat", headers: { "X-CSRFToken": "__CSRF__" } }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
  onToolCall: ({ toolCall }) => {
    if (toolCall.toolName === "getLocation")
      chat.addToolOutput({ tool: "getLocation", toolCallId: toolCall.toolCallId, output: "Kyoto" });
  },
  onError: render,
});
document.getElementById("sid").textContent = chat.id;
document.getElementById("f").onsubmit = e => {
  e.preventDefault();
  const q = document.getElementById("q");
  if (q.value.trim()) chat.sendMessage({ text: q.value });
  q.value = "";
};
document.getElementById("regen").onclick = () => chat.regenerate();
</script>
"""


@login_required(login_url="/admin/login/")
def chat_page(request: HttpRequest) -> HttpResponse:
    """The page (the CSRF token goes in the transport's headers: a logged-in session needs it)."""
    html = PAGE.replace("__AI_VERSION__", AI_VERSION).replace("__CSRF__", get_token(request))
    return HttpResponse(html)
