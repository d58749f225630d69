// Fold check: what the real AI SDK chat (AbstractChat of ai 6.0.25, the newest
// 6.x or 7.x) holds after one response, given the messages it held when it
// sent the request and the chunks of the response. The server's message fold
// (adk_stream_protocol/protocol/message_fold.py) must give the same messages.
//
// The chat is the package's own AbstractChat, with a state like @ai-sdk/react's
// (a pushed message is the live object, a replaced one a structuredClone) and
// the package's DefaultChatTransport, whose fetch answers with the chunks as
// an SSE body: so the chunks are parsed and validated as on the wire. The
// request is AbstractChat's own makeRequest with the job's trigger and
// messageId, as sendMessage(), addToolApprovalResponse + sendAutomaticallyWhen
// and regenerate() (after it drops the answer) call it.
//
//   node fold-check.mjs < job.json > report.json
//
// Job: {client: "6.0.25" | "6" | "7", messages: UIMessage[], chunks: chunk[],
//       trigger?: "submit-message" (default) | "regenerate-message",
//       messageId?, newMessageId? (the id the chat draws for a new message)}
// Report: {messages (the chat's messages, as JSON), status, error}
//
// chat-client.mjs --serve runs a job {"fold": <job>} with runFoldJob, so the
// tests' one Node process serves these too (tests/support/real_client.py).

import process from 'node:process';
import { pathToFileURL } from 'node:url';

// Client name -> the npm alias it is installed as (package.json pins each).
const CLIENT_PACKAGES = { '6.0.25': 'ai-6.0.25', 6: 'ai', 7: 'ai-7' };

class ReactLikeChatState {
  #messages = [];
  status = 'ready';
  error = undefined;

  get messages() {
    return this.#messages;
  }
  set messages(value) {
    this.#messages = [...value];
  }
  pushMessage = message => {
    this.#messages = this.#messages.concat(message);
  };
  popMessage = () => {
    this.#messages = this.#messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.#messages = [
      ...this.#messages.slice(0, index),
      this.snapshot(message),
      ...this.#messages.slice(index + 1),
    ];
  };
  snapshot = value => structuredClone(value);
}

function sseBody(chunks) {
  return chunks.map(chunk => `data: ${JSON.stringify(chunk)}\n\n`).join('') + 'data: [DONE]\n\n';
}

export async function runFoldJob(job) {
  const alias = CLIENT_PACKAGES[job.client];
  if (alias === undefined) throw new Error(`unknown client ${JSON.stringify(job.client)}`);
  const ai = await import(alias);
  const body = sseBody(job.chunks);
  const transport = new ai.DefaultChatTransport({
    api: 'http://fold-check.invalid/stream',
    fetch: async () =>
      new Response(body, {
        status: 200,
        headers: {
          'content-type': 'text/event-stream',
          'x-vercel-ai-ui-message-stream': 'v1',
        },
      }),
  });
  const state = new ReactLikeChatState();
  state.messages = structuredClone(job.messages);
  const errors = [];
  const chat = new ai.AbstractChat({
    id: 'fold-check',
    state,
    transport,
    generateId: () => job.newMessageId ?? 'new-message-id',
    onError: error => errors.push(error instanceof Error ? error.message : String(error)),
  });
  // Private in TypeScript only: the request every public entry point makes.
  await chat.makeRequest({
    trigger: job.trigger ?? 'submit-message',
    messageId: job.messageId,
  });
  return {
    messages: JSON.parse(JSON.stringify(chat.messages)),
    status: chat.status,
    error: chat.error?.message ?? null,
    errors,
  };
}

async function main() {
  let text = '';
  process.stdin.setEncoding('utf8');
  for await (const piece of process.stdin) text += piece;
  const report = await runFoldJob(JSON.parse(text));
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch(error => {
    console.error(error?.stack ?? String(error));
    process.exit(2);
  });
}
