// The AI SDK's own conversion of a corpus of stored conversations (UIMessages) into provider
// request bodies: convertToModelMessages, then generateText with the OpenAI Chat, OpenAI Responses
// and Anthropic models, each given a fetch that keeps the request body and answers nothing (no
// network). Reads {"cases": [{"name", "messages"}]} on stdin, writes {name: {target: body}} on
// stdout. tests/test_convert_ai_sdk.py compares the bodies with agent_sessions.convert.
import { convertToModelMessages, generateText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';

class Captured extends Error {}

function capturing() {
  const seen = { body: undefined, headers: undefined };
  const fetch = async (url, init) => {
    seen.body = JSON.parse(init.body);
    seen.headers = Object.fromEntries(new Headers(init.headers).entries());
    throw new Captured('captured');
  };
  return { seen, fetch };
}

const TARGETS = {
  chat: fetch => createOpenAI({ apiKey: 'test', fetch }).chat('gpt-4o'),
  responses: fetch => createOpenAI({ apiKey: 'test', fetch }).responses('gpt-4o'),
  anthropic: fetch => createAnthropic({ apiKey: 'test', fetch })('claude-sonnet-4-5'),
};

async function bodyFor(target, modelMessages) {
  const { seen, fetch } = capturing();
  try {
    await generateText({
      model: TARGETS[target](fetch),
      messages: modelMessages,
      allowSystemInMessages: true,
      maxRetries: 0,
      // Stateless Responses calls (store: false), as a stored history is resent whole: the SDK then
      // sends reasoning items themselves instead of references to items kept on OpenAI's side.
      providerOptions: { openai: { store: false } },
    });
  } catch (error) {
    if (seen.body === undefined) {
      return { error: error?.name ?? String(error), message: error?.message ?? '' };
    }
  }
  const body = seen.body;
  if (target === 'chat') return { messages: body.messages };
  if (target === 'responses') return { input: body.input };
  const out = { messages: body.messages };
  if (body.system !== undefined) out.system = body.system;
  if (seen.headers['anthropic-beta']) out.beta = seen.headers['anthropic-beta'];
  return out;
}

async function main() {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  const { cases } = JSON.parse(text);
  const out = {};
  for (const { name, messages } of cases) {
    out[name] = {};
    // "drop": the AI SDK's ignoreIncompleteToolCalls; "raise": its default (MissingToolResultsError).
    for (const [policy, ignore] of [['drop', true], ['raise', false]]) {
      const modelMessages = await convertToModelMessages(messages, { ignoreIncompleteToolCalls: ignore });
      for (const target of Object.keys(TARGETS)) {
        out[name][`${target}:${policy}`] = await bodyFor(target, modelMessages);
      }
    }
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch(error => {
  process.stderr.write(String(error?.stack ?? error));
  process.exit(1);
});
