// Drives the real `ai` client against resumable chat generations (SPEC §10) and prints what the clients hold.
//
// Env: CHAT_API, CHAT_TOKEN, SCENARIO:
//   live        reload mid-answer (a second Chat resumes), two tabs on one chat, stop mid-answer, onData
//   kill-start  send a slow message, print `STREAMING <chat id> <user message id>` once deltas arrive, then wait
//   kill-resume a reloaded Chat (MESSAGES: the stored messages, JSON) resumes on CHAT_ID; prints its snapshot
// The server mounts tests/support/chat_urls.py ("slow" = forty deltas 50 ms apart) with Redis configured.
import { DefaultChatTransport } from 'ai';
import { PlainChat, snapshot, until } from './plain_chat.mjs';

const API = process.env.CHAT_API;
const TOKEN = process.env.CHAT_TOKEN;
if (!API || !TOKEN) throw new Error('set CHAT_API and CHAT_TOKEN');

class Chat extends PlainChat {
  constructor(init) {
    super({ ...init, transport: new DefaultChatTransport({
      api: API, headers: { Authorization: `Bearer ${TOKEN}` },
    }) });
  }
}

const has = (chat, text) => JSON.stringify(chat.lastMessage?.parts ?? []).includes(text);
// What a reloaded page shows before it resumes: the stored messages, here the first tab's posted ones.
const reloaded = chat => structuredClone(chat.messages.filter(m => m.role === 'user'));
const run = Date.now().toString(36);

async function live() {
  const out = {};
  // 1. reload mid-answer: the first page keeps streaming, a reloaded page resumes and gets the whole answer.
  {
    const data = [];
    const first = new Chat({ id: `reload-${run}`, onData: part => data.push(part) });
    const sending = first.sendMessage({ text: 'slow please' });
    await until(() => has(first, 'w3 '), 'the first deltas');
    const second = new Chat({ id: first.id, messages: reloaded(first) });
    await second.resumeStream(); // what useChat({ resume: true }) does when it mounts
    await sending;
    out.reload = { first: snapshot(first), second: snapshot(second), data };
  }
  // 2. two tabs on one chat: the second opens mid-answer; then it sends the next turn, which the first resumes.
  {
    const tab1 = new Chat({ id: `tabs-${run}` });
    const sending = tab1.sendMessage({ text: 'slow please' });
    await until(() => has(tab1, 'w5 '), 'the first deltas');
    const tab2 = new Chat({ id: tab1.id, messages: reloaded(tab1) });
    await Promise.all([tab2.resumeStream(), sending]);
    const first = { tab1: snapshot(tab1), tab2: snapshot(tab2) };
    await tab2.sendMessage({ text: 'and again' });
    out.tabs = { ...first, after: snapshot(tab2) };
  }
  // 3. stop mid-answer: the stop button posts to {id}/stop; the open stream ends with finish.
  {
    const chat = new Chat({ id: `stop-${run}` });
    const sending = chat.sendMessage({ text: 'slow please' });
    await until(() => has(chat, 'w2 '), 'the first deltas');
    const watcher = new Chat({ id: chat.id, messages: reloaded(chat) });
    const watching = watcher.resumeStream();
    const stopped = await fetch(`${API}/${encodeURIComponent(chat.id)}/stop`, {
      method: 'POST', headers: { Authorization: `Bearer ${TOKEN}` },
    });
    await Promise.all([sending, watching]);
    out.stop = { ...snapshot(chat), stopStatus: stopped.status, watcher: snapshot(watcher) };
    // nothing to resume any more
    const later = new Chat({ id: chat.id, messages: reloaded(chat) });
    await later.resumeStream();
    out.stop.later = snapshot(later);
  }
  return out;
}

if (process.env.SCENARIO === 'live') {
  process.stdout.write(JSON.stringify(await live()));
} else if (process.env.SCENARIO === 'kill-start') {
  const chat = new Chat({ id: `kill-${run}`, onError: () => {} });
  chat.sendMessage({ text: 'slow please' }).catch(() => {});
  await until(() => has(chat, 'w3 '), 'the first deltas');
  process.stdout.write(`STREAMING ${chat.id} ${chat.messages[0].id}\n`);
  await new Promise(() => {}); // killed by the test with its server
} else if (process.env.SCENARIO === 'kill-resume') {
  const chat = new Chat({ id: process.env.CHAT_ID, messages: JSON.parse(process.env.MESSAGES) });
  await chat.resumeStream();
  process.stdout.write(JSON.stringify(snapshot(chat)));
} else {
  throw new Error(`unknown SCENARIO ${process.env.SCENARIO}`);
}
