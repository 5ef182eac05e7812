// What both ai-client drivers share: a framework-free Chat (AbstractChat over a plain state, what useChat
// wraps), a wait for a condition, and the snapshot of a chat the scripts print.
import { AbstractChat } from 'ai';

export class PlainState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }
  pushMessage = message => { this.messages = this.messages.concat(message); };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  };
  snapshot = value => structuredClone(value);
}

export class PlainChat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new PlainState(messages) });
  }
}

export async function until(predicate, what, ms = 20000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise(resolve => setTimeout(resolve, 20));
  }
}

export const snapshot = chat => ({
  id: chat.id,
  status: chat.status,
  error: chat.error ? String(chat.error.message ?? chat.error) : null,
  messages: structuredClone(chat.messages),
});
