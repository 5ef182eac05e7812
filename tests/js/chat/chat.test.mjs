// Drives the real `ai` client against a live ChatView and prints what the client holds, as JSON.
//
// Env: CHAT_API (e.g. http://127.0.0.1:8000/api/chat), CHAT_TOKEN (a Bearer API key).
// The server mounts tests/support/chat_urls.py (a scripted fake model). Each scenario runs the
// framework-free chat (AbstractChat over a plain state, what useChat wraps) with
// DefaultChatTransport; the pytest side compares the printed messages with what was stored.
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';
import { PlainChat, snapshot, until } from './plain_chat.mjs';

const API = process.env.CHAT_API;
const TOKEN = process.env.CHAT_TOKEN;
if (!API || !TOKEN) throw new Error('set CHAT_API and CHAT_TOKEN');

const Chat = PlainChat;

function transport(options = {}) {
  return new DefaultChatTransport({ api: API, headers: { Authorization: `Bearer ${TOKEN}` }, ...options });
}


const out = {};
const run = Date.now().toString(36);

// 1. send, then regenerate the reply (a sibling on the server).
{
  const chat = new Chat({ id: `send-${run}`, transport: transport() });
  await chat.sendMessage({ text: 'hello there' });
  out.send = snapshot(chat);
  await chat.sendMessage({ text: 'and again' });
  out.second = snapshot(chat);
  await chat.regenerate();
  out.regenerate = snapshot(chat);
}

// 2. a client-side tool: the call streams to the client, its output goes back in the next request.
{
  const toolCalls = [];
  const chat = new Chat({
    id: `tool-${run}`,
    transport: transport(),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: async ({ toolCall }) => {
      toolCalls.push(toolCall);
      if (toolCall.toolName === 'getLocation') {
        chat.addToolOutput({ tool: 'getLocation', toolCallId: toolCall.toolCallId, output: 'Oslo' });
      }
    },
  });
  await chat.sendMessage({ text: 'what is the weather' });
  await until(
    () => chat.status === 'ready' && JSON.stringify(chat.lastMessage?.parts ?? []).includes('Sunny in Oslo.'),
    'the tool follow-up',
  );
  out.tool = { ...snapshot(chat), toolCalls };
}

// 3. respond raises mid-stream: the client ends in error with what arrived.
{
  const errors = [];
  const chat = new Chat({ id: `error-${run}`, transport: transport(), onError: e => errors.push(String(e.message)) });
  await chat.sendMessage({ text: 'please fail' });
  out.error = { ...snapshot(chat), errors };
}

// 4. only the last message is sent (the AI SDK's persistence example).
{
  const chat = new Chat({
    id: `last-${run}`,
    transport: transport({
      prepareSendMessagesRequest: ({ id, messages, trigger, messageId }) => ({
        body: { id, messages: [messages[messages.length - 1]], trigger, messageId },
      }),
    }),
  });
  await chat.sendMessage({ text: 'first' });
  await chat.sendMessage({ text: 'second' });
  out.lastOnly = snapshot(chat);
}

// 5. the client goes away mid-stream (stop() aborts the fetch).
{
  const chat = new Chat({ id: `stop-${run}`, transport: transport() });
  const sending = chat.sendMessage({ text: 'slow please' });
  await until(() => JSON.stringify(chat.lastMessage?.parts ?? []).includes('w2 '), 'the first deltas');
  await chat.stop();
  await sending;
  out.stop = snapshot(chat);
}

process.stdout.write(JSON.stringify(out));
