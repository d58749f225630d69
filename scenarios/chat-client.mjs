// Real-client checker: drives the AI SDK chat state machine (AbstractChat from
// the real `ai` package: 6.0.25, the newest 6.x or 7.x) against a running
// server, over one of three transports:
//   - POST /stream with the package's own DefaultChatTransport;
//   - WS /live with the project's WebSocketChatTransport (client/dist), which
//     speaks our `/live` envelope (docs/live-protocol.md);
//   - WS /live with ai 7's own (stock) WebSocketChatTransport.
//
// The scenario catalogue (catalogue/*.json, run by tests/test_scenarios.py)
// chooses a job's client and transport per run: "stream" is "http" for every
// client; "live" is "ws" for 6.0.25 and 6, and for 7 "ws-stock" and/or "ws"
// as the scenario's `v7Live` says (["stock"] by default, "ours" for ours);
// `transports` and `clients` narrow the runs (README.md, "The run matrix").
//
//   node chat-client.mjs < job.json > report.json      (logs go to stderr)
//
//   node chat-client.mjs --serve < jobs > reports      (one JSON per line, see serve())
//
// A job {"fold": {...}} is a fold check instead (fold-check.mjs): one response's
// chunks folded into a chat, no server; its report is fold-check.mjs's.
//
// Set-up: `npm ci` here; for "ws" also `npm ci` in ../client first (its
// `prepare` builds ../client/dist; run `npm run build` there after editing the
// transport). ai 7 declares node >=22; on Node 20 npm only warns (EBADENGINE).
//
// Everything the chat does comes from the real package. This script only
// supplies in-memory state storage, a fetch wrapper (or a WebSocket subclass)
// that records the wire, and the user's actions (the job's steps). Our
// transport imports `ai`; here that import resolves to the job's client
// package (a module resolve hook), as an app's bundler would resolve it.
//
// Job (one JSON object on stdin):
//   client                 "6.0.25" | "6" (the newest 6.x, default) | "7" (the
//                          newest 7.x): the `ai` package of AbstractChat and of
//                          the transport
//   transport              "http" (default): the client's DefaultChatTransport
//                          "ws": our WebSocketChatTransport (client/dist) over
//                          `ws`, one socket per chat at `api?chatId=…`
//                          "ws-stock": ai 7's WebSocketChatTransport (client
//                          "7" only) over `ws`, at `api` as given (no query
//                          string): requestId-correlated send/resume/abort
//                          frames, answered by start/chunk/end/error/no-active
//   api                    POST endpoint, e.g. "http://127.0.0.1:8000/stream",
//                          or the socket URL "ws://127.0.0.1:8000/live"
//   chatId, headers, body  passed to AbstractChat / the transport (for "ws",
//                          headers go on the upgrade request of the recording
//                          socket: a browser cannot do that; for "ws-stock",
//                          into every frame, which is what that transport does)
//   closeStreamAt, pingIntervalMs, sendOnlyLastMessages
//                          "ws" only: passed to WebSocketChatTransport
//   lastMessageOnly        the page sends only the chat's last message; the server
//                          completes the chat from its record (docs/adr/0069):
//                          "recipe": the AI SDK's persistence recipe as README shows it,
//                          body { id, message, trigger, messageId } ("http");
//                          "messages": `messages: [last]` (prepareSendMessagesRequest for
//                          "http" and "ws-stock", sendOnlyLastMessages for "ws")
//   initialMessages        the page's chat when it loads (useChat({ id, messages }))
//   sendAutomaticallyWhen  "none" | "approvals" | "tool-calls" | "both"
//   toolOutputs            {toolName: {output} | {errorText}, afterApproval?}:
//                          browser tools answered from onToolCall; with
//                          afterApproval only once the user approved the call
//   sendAutomaticallyWhen  "seed": the seed documents' rules (see seedRules)
//                          "add-output": README's add-output pattern (approvals or tool calls,
//                          not while the page runs an approved browser tool)
//   maxRequests            loop guard (default 8); timeoutMs (default 60000)
//   steps                  run one by one, each until the chat is quiescent:
//     {action:"send", text?, files?, messageId? | messageIndex?, stopOnServerAfterMs?}
//      (with messageId or messageIndex of an earlier user message: an edit, as useChat's
//      sendMessage({text, messageId}) edits it)
//      (stopOnServerAfterMs: that long after sending, DELETE the chat's answer on
//      the server, as another tab's Stop does; statuses in `serverStops`)
//     {action:"regenerate", messageId? | messageIndex?}
//     {action:"approve", approved? (bool, or one per matching part), reason?,
//      toolName?, toolCallId?, output? | errorText? (run the tool as approved),
//      payload? (an edited confirmation payload: a data-approval-response part),
//      outputFrame? ("ws": the output also goes as a `tool_result` frame, right after the
//      approval), runMs? (the page runs the approved tool this long before adding its output)}
//     {action:"toolOutput", toolName?, toolCallId?, output? | errorText?}
//     {action:"stop", afterChunks}   arms a stop for the NEXT response: it is
//      cut after `afterChunks` chunks, the frames after the cut are held back
//      until the chat has stopped (over "ws" our transport then sends an
//      `interrupt` frame, over "ws-stock" the stock one an `abort` frame), then
//      handed to the transport, which must drop them
//     {action:"wait", ms}            the user takes their time
//     {action:"resume"}              chat.resumeStream(), as useChat({resume:true}) on mount
//     {action:"reload"}              the page reloads: the chat and its transport (socket)
//      are dropped, GET {origin}/chats/{chatId} reads the chat back, and a new chat (same
//      id, transport kind and client) is built on its messages, as useChat({id, messages});
//      the later steps act on it and the report's messages are its; with resume:true, as
//      the README's recipe for useChat({resume}): an active answer that continues the last
//      message gets a chat without that message (follow it with {action:"resume"})
//     {action:"interrupt", afterChunks?}   "http" or "ws": the same as stop
//      (default 1 chunk); over "ws" the transport must drop the rest of that
//      response up to its [DONE]
//     {action:"audio", chunks?, sampleRate?, withMessage?}   "ws" only:
//      audio_control start, `chunks` (default 10) × 100 ms of a 440 Hz sine as
//      PCM16, audio_control stop; withMessage first sends a voice message (one
//      data-voice part, no text) that opens the request the audio answers
//
// Report (one JSON object on stdout): requests (wire record per request, with
// parsed chunks and `violations`: for each client name, what its chunk schema
// says of every chunk: {"6.0.25": [...], "6": [...], "7": [...]}), messages,
// status, error, finishReasons, loop, timeout, toolCalls, steps, reloads (each reload's
// `afterRequest` and the status of its GET /chats/{chatId}). Exit code 0
// whenever a report is printed.
// For "http", a request has its SSE `events`, `rawBody`, `status`.
// For "ws", a request is one `message` frame and its response: the frames
// received for it up to its [DONE] (`frames`, `events`, `frameProblems`),
// the control frames and other frames sent meanwhile (`controls`, `sent`),
// `refused` (an error control frame answered it), `closedBeforeDone`; and
// `ws` lists connections, every control frame, the frames the transport
// handed to onControl, frames sent outside a request, and stray data frames.
// For "ws-stock", a request is one `send` or `resume` frame (`kind`,
// `requestId`; `request.body` is that frame) and every frame received with
// its requestId (`frames`, parsed), its chunks and their `sequences`,
// `ended` ("end" | "error" | "no-active" | null), `errorText`, `aborted` (an
// abort frame went out), `sent` (its other frames, i.e. abort),
// `framesAfterAbort`, `closedBeforeEnd`, `frameProblems` (unknown frame type,
// bad or out-of-order sequence, a frame after the request ended); and `ws`
// lists connections, frames sent outside a request, and `strayFrames` (not
// JSON, no requestId, or a requestId never sent: the stock transport fails
// every open request on the first two).

import { readFileSync } from 'node:fs';
import { runFoldJob } from './fold-check.mjs';
import { register } from 'node:module';
import process from 'node:process';

// After a step, the chat must stay idle this long before we call it quiescent,
// so an automatic resubmission (sendAutomaticallyWhen) has time to start.
const SETTLE_MS = 300;
const POLL_MS = 10;
const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_REQUESTS = 8;
// Before aborting for a "stop" step, the chat must have stopped changing for
// this long, so the chunks we let through have really been applied.
const STOP_QUIET_MS = 100;
// A reload: how long the new page takes to load before it reads the chat back. The catalogue
// runs all its jobs at once, and at 250 ms a loaded server had not always let the old socket
// go yet (reload-ends-a-live-browser-call read the call still waiting); a real page's reload
// takes this long or more.
const PAGE_LOAD_MS = 1000;

// Client name -> the npm alias it is installed as (package.json pins each).
const CLIENT_PACKAGES = { '6.0.25': 'ai-6.0.25', 6: 'ai', 7: 'ai-7' };
const isV7 = client => client === '7';
const AUTO_SEND_MODES = new Set(['none', 'approvals', 'tool-calls', 'both', 'seed', 'add-output']);
const ACTIONS = new Set([
  'send', 'regenerate', 'approve', 'toolOutput', 'stop', 'interrupt', 'audio', 'wait',
  'resume', 'reload',
]);
const TRANSPORTS = new Set(['http', 'ws', 'ws-stock']);
// Where the checker finds the shipped WebSocket transport (built by `npm ci`
// or `npm run build` in client/).
const WS_TRANSPORT_MODULE = new URL('../client/dist/ws-chat-transport.js', import.meta.url);

// Our transport's `import ... from 'ai'` resolves, in a real app, to the app's
// own `ai`. Here it is imported once per client as `ws-chat-transport.js?ai=<alias>`
// and this resolve hook sends its `ai` to that alias in scenarios/node_modules.
const RESOLVE_HOOK = `
const scenarios = ${JSON.stringify(import.meta.url)};
export async function resolve(specifier, context, next) {
  const marker = '?ai=';
  const at = context.parentURL?.indexOf(marker) ?? -1;
  if (specifier === 'ai' && at !== -1) {
    const alias = decodeURIComponent(context.parentURL.slice(at + marker.length));
    return next(alias, { ...context, parentURL: scenarios });
  }
  return next(specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(RESOLVE_HOOK)}`);

const log = (...args) => console.error('[chat-client]', ...args);
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const errorMessage = error =>
  error instanceof Error ? error.message : String(error);

// ---------------------------------------------------------------------------
// SSE parsing, with the semantics of eventsource-parser as the client uses it:
// lines end with CRLF, LF or CR; a blank line dispatches the event if it had at
// least one data line; data lines are joined with "\n"; one space after the
// colon is dropped; comments and other fields are ignored. There is no flush:
// an event without its terminating blank line is never dispatched.
// ---------------------------------------------------------------------------

function createSseParser({ onEvent = () => {}, onLine = () => {} }) {
  let buffer = '';
  let dataLines = [];

  // Returns the event data when this line dispatched an event.
  function processLine(line) {
    if (line === '') {
      const data = dataLines.length > 0 ? dataLines.join('\n') : undefined;
      dataLines = [];
      if (data !== undefined) onEvent(data);
      return data;
    }
    if (line.startsWith(':')) return undefined; // comment (e.g. keep-alive)
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') dataLines.push(value);
    return undefined;
  }

  // Feeds decoded text (TextDecoder has already dropped a leading BOM, as the
  // client's TextDecoderStream does). A lone CR at the very end of the buffer
  // may be the first half of a CRLF, so (like the real parser) it waits.
  function feed(text) {
    buffer += text;
    let start = 0;
    for (;;) {
      const match = /\r\n|\n|\r/g;
      match.lastIndex = start;
      const found = match.exec(buffer);
      if (found === null) break;
      const terminator = found[0];
      if (terminator === '\r' && found.index === buffer.length - 1) break;
      const end = found.index + terminator.length;
      const dispatched = processLine(buffer.slice(start, found.index));
      onLine(buffer.slice(start, end), dispatched);
      start = end;
    }
    buffer = buffer.slice(start);
  }

  return { feed };
}

// All events of a complete body, plus the text after the last blank line:
// the client drops that tail silently because the parser has no flush.
function parseSseEvents(text) {
  const events = [];
  let consumed = 0;
  let boundary = 0;
  const parser = createSseParser({
    onEvent: data => events.push(data),
    onLine: line => {
      consumed += line.length;
      if (/^(\r\n|\n|\r)$/.test(line)) boundary = consumed;
    },
  });
  parser.feed(text);
  return { events, undispatchedTail: text.slice(boundary) };
}

// ---------------------------------------------------------------------------
// Chunk validation against the package's own uiMessageChunkSchema (a lazy
// schema whose value has an async `validate`, the same call the transport's
// JSON event stream parser makes).
// ---------------------------------------------------------------------------

// Zod reports a failed union as one issue per branch; keep only the branches
// whose `type` matched, so the message says what is wrong with this chunk.
function relevantIssues(issues) {
  const out = [];
  for (const issue of issues ?? []) {
    if (issue.code === 'invalid_union' && Array.isArray(issue.errors)) {
      const matching = issue.errors.filter(
        branch => !branch.some(i => i.path?.[0] === 'type'),
      );
      if (matching.length === 0) {
        out.push({ path: ['type'], message: 'unknown chunk type' });
      } else {
        for (const branch of matching) out.push(...relevantIssues(branch));
      }
    } else {
      out.push(issue);
    }
  }
  return out;
}

function describeIssues(issues) {
  return issues
    .map(issue => {
      const path = (issue.path ?? []).join('.');
      const keys = issue.keys ? ` (${issue.keys.join(', ')})` : '';
      return `${path || '(chunk)'}: ${issue.message}${keys}`;
    })
    .join('; ');
}

// What each client's chunk schema says of these chunks: {clientName: violations}.
async function violationsByClient(schemas, chunkEntries) {
  const out = {};
  for (const [client, schema] of Object.entries(schemas)) {
    out[client] = await validateChunks(schema, chunkEntries);
  }
  return out;
}

async function validateChunks(schema, chunkEntries) {
  const violations = [];
  for (const entry of chunkEntries) {
    if (entry.parseError != null) {
      violations.push({
        index: null,
        eventIndex: entry.eventIndex,
        chunk: entry.raw,
        error: `invalid JSON: ${entry.parseError}`,
      });
      continue;
    }
    const result = await schema.validate(entry.value);
    if (result.success) continue;
    const issues = relevantIssues(result.error?.issues);
    violations.push({
      index: entry.index,
      eventIndex: entry.eventIndex,
      chunk: entry.value,
      error:
        issues.length > 0
          ? describeIssues(issues)
          : errorMessage(result.error),
      issues,
    });
  }
  return violations;
}

// ---------------------------------------------------------------------------
// Chat state: mirrors @ai-sdk/react's ReactChatState (arrays replaced, not
// mutated; replaceMessage stores a structuredClone snapshot), minus the React
// callbacks. `onChange` lets the runner notice activity.
// ---------------------------------------------------------------------------

class MemoryChatState {
  #messages = [];
  #status = 'ready';
  #error = undefined;

  constructor(onChange, statusHistory = []) {
    this.onChange = onChange;
    this.statusHistory = statusHistory;
  }

  get status() {
    return this.#status;
  }
  set status(value) {
    this.#status = value;
    this.statusHistory.push(value);
    this.onChange();
  }
  get error() {
    return this.#error;
  }
  set error(value) {
    this.#error = value;
    this.onChange();
  }
  get messages() {
    return this.#messages;
  }
  set messages(value) {
    this.#messages = [...value];
    this.onChange();
  }

  pushMessage = message => {
    this.#messages = this.#messages.concat(message);
    this.onChange();
  };
  popMessage = () => {
    this.#messages = this.#messages.slice(0, -1);
    this.onChange();
  };
  replaceMessage = (index, message) => {
    this.#messages = [
      ...this.#messages.slice(0, index),
      this.snapshot(message),
      ...this.#messages.slice(index + 1),
    ];
    this.onChange();
  };
  snapshot = value => structuredClone(value);
}

// ---------------------------------------------------------------------------
// Wire recorder: a fetch for DefaultChatTransport that records each request
// and tees the response body (one branch to the client, one read as text).
// ---------------------------------------------------------------------------

function headersToObject(headers) {
  return Object.fromEntries(new Headers(headers ?? {}).entries());
}

function parseRequestBody(body) {
  if (typeof body !== 'string') return body ?? null;
  try {
    return JSON.parse(body);
  } catch {
    return body;
  }
}

class LoopGuardError extends Error {}

function createRecorder({ maxRequests, touch }) {
  const recorder = {
    records: [],
    inFlight: 0,
    loop: false,
    loopRequest: null,
    armedStop: null, // {afterChunks, onCut} for the next response
  };

  async function readAll(record, stream) {
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        record.rawBody += decoder.decode(value, { stream: true });
      }
      record.rawBody += decoder.decode();
    } catch (error) {
      record.bodyError = errorMessage(error);
    }
  }

  recorder.fetch = async (input, init = {}) => {
    const request = {
      method: init.method ?? 'GET',
      url: String(input),
      headers: headersToObject(init.headers),
      body: parseRequestBody(init.body),
    };
    if (recorder.records.length >= maxRequests) {
      // Rejecting (rather than aborting) makes the chat end in status "error",
      // which stops automatic resubmission in every client version.
      recorder.loop = true;
      recorder.loopRequest = request;
      touch();
      throw new LoopGuardError(
        `loop guard: more than ${maxRequests} requests (maxRequests)`,
      );
    }

    const record = {
      request,
      status: null,
      responseHeaders: {},
      rawBody: '',
      bodyError: null,
      networkError: null,
      stopped: false,
      done: null,
    };
    recorder.records.push(record);
    recorder.inFlight++;
    touch();
    const finished = () => {
      recorder.inFlight--;
      touch();
    };

    let response;
    try {
      response = await fetch(input, init);
    } catch (error) {
      record.networkError = errorMessage(error);
      finished();
      throw error;
    }
    record.status = response.status;
    record.responseHeaders = headersToObject(response.headers);
    if (response.body == null) {
      finished();
      return response;
    }

    const [forClient, forRecord] = response.body.tee();
    record.done = readAll(record, forRecord).finally(finished);

    const stop = recorder.armedStop;
    recorder.armedStop = null;
    const clientBody = stop
      ? cutAfterChunks(forClient, stop, record, init.signal)
      : forClient;
    return new Response(clientBody, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };

  return recorder;
}

// Lets exactly `afterChunks` JSON events through to the client, then holds the
// rest back and calls `onCut` (which stops the chat). The stream errors with
// the abort reason once the chat aborts the request.
function cutAfterChunks(source, { afterChunks, onCut }, record, signal) {
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  let delivered = 0;
  let cut = false;
  let controllerRef;
  const lines = [];
  const parser = createSseParser({
    onLine: (line, dispatched) => lines.push({ line, dispatched }),
  });

  const abortHandler = () => {
    try {
      controllerRef?.error(
        signal.reason ?? new DOMException('aborted', 'AbortError'),
      );
    } catch {
      // already closed or errored
    }
  };
  signal?.addEventListener('abort', abortHandler, { once: true });

  return new ReadableStream({
    async start(controller) {
      controllerRef = controller;
      const reader = source.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          if (cut) continue; // keep draining; the client sees nothing more
          parser.feed(decoder.decode(value, { stream: true }));
          // Forward line by line so the cut lands exactly on an event border.
          for (const { line, dispatched } of lines) {
            controller.enqueue(encoder.encode(line));
            if (dispatched !== undefined && dispatched !== '[DONE]') delivered++;
            if (delivered >= afterChunks) {
              cut = true;
              break;
            }
          }
          lines.length = 0;
          if (cut && !record.stopped) {
            record.stopped = true;
            record.deliveredChunks = delivered;
            void onCut();
          }
        }
        // The body ended before the cut: behave like an untouched response.
        if (!cut) controller.close();
      } catch (error) {
        try {
          controller.error(error);
        } catch {
          // already errored by the abort handler
        }
      }
    },
  });
}

// ---------------------------------------------------------------------------
// WebSocket wire recorder: a subclass of the `ws` WebSocket that the transport
// is given as its constructor. Every frame is recorded as it crosses the
// socket. Each `message` frame sent opens a request record; the data frames
// received belong to the oldest record still waiting for its [DONE] (the
// protocol answers requests one at a time, in order).
// ---------------------------------------------------------------------------

// The events of one frame. The transport reads a frame as one whole SSE event,
// so a missing terminating blank line is supplied here and reported apart.
const frameEvents = frame => parseSseEvents(`${frame}\n\n`).events;

// Audio payloads are summarised: the report needs their number, not the bytes.
function summarizeSent(frame) {
  if (frame?.type !== 'audio_chunk') return frame;
  const { chunk, ...rest } = frame;
  return { ...rest, bytes: typeof chunk === 'string' ? Math.floor((chunk.length * 3) / 4) : null };
}

// A stop cuts a response after `afterChunks` chunks: every frame after the cut
// is held back until the chat has stopped, then delivered, so the transport
// must drop the rest of that response itself.
function createHold(touch) {
  const hold = {
    holding: false,
    held: [],
    release() {
      hold.holding = false;
      for (const deliver of hold.held.splice(0)) deliver();
      touch();
    },
    cutIfDue(record) {
      if (record.deliveredChunks >= record.stop.afterChunks && record.pending) {
        record.stopped = true;
        hold.holding = true;
        Promise.resolve()
          .then(record.stop.onCut)
          .finally(hold.release);
      }
    },
  };
  return hold;
}

// A closed socket ends the requests still open on it; `key` records how.
function closeRecorder(recorder, touch, key) {
  return (connection, code, reason) => {
    connection.close = { code, reason };
    for (const record of recorder.records) {
      if (record.pending && recorder.connections[record.connection] === connection) {
        record.pending = false;
        record[key] = { code, reason };
      }
    }
    touch();
  };
}

// A `ws` WebSocket that records what the transport sends and receives, before the
// transport's own listeners see it. While the recorder holds (a stop cut the
// response), received frames are queued in `held` and handed over later; the
// transports assign onmessage / onclose, which `ws` turns into
// addEventListener calls, so holding works for both.
function recordingSocketClass(WebSocket, hooks) {
  const { recorder, touch, hold, onReceived, onSent, onClose, options } = hooks;
  return class RecordingWebSocket extends WebSocket {
    #connection;
    #holdThis = false;

    constructor(url, protocols) {
      super(url, protocols, options);
      this.#connection = { url: String(url), opened: false, close: null };
      recorder.connections.push(this.#connection);
      recorder.sockets = [...(recorder.sockets ?? []), this];
      this.on('open', () => {
        this.#connection.opened = true;
        touch();
      });
      this.on('message', (data, isBinary) => {
        this.#holdThis = hold.holding;
        if (isBinary) {
          recorder.strayFrames.push({
            afterRequest: recorder.records.length - 1,
            ...hooks.binaryFrame,
          });
        } else {
          onReceived(String(data));
        }
      });
      this.on('close', (code, reason) => {
        this.#holdThis = hold.holding;
        onClose(this.#connection, code, String(reason));
      });
    }

    addEventListener(type, listener, options) {
      if (type !== 'message' && type !== 'close') {
        return super.addEventListener(type, listener, options);
      }
      return super.addEventListener(
        type,
        event => {
          if (this.#holdThis) hold.held.push(() => listener.call(this, event));
          else listener.call(this, event);
        },
        options,
      );
    }

    send(data, ...rest) {
      onSent(this.#connection, String(data));
      return super.send(data, ...rest);
    }
  };
}


function createWsRecorder({ maxRequests, touch, WebSocket, headers }) {
  const recorder = {
    records: [],
    connections: [],
    controls: [], // every control frame received: {request, frame}
    sent: [], // frames other than `message` sent while no request was open
    strayFrames: [], // data frames received while no request was open
    loop: false,
    loopRequest: null,
    armedStop: null, // {afterChunks, onCut} for the next response
    get inFlight() {
      return this.records.filter(record => record.pending).length;
    },
  };
  const receiving = () => recorder.records.find(record => record.pending);
  const indexOf = record => (record ? recorder.records.indexOf(record) : null);

  const hold = createHold(touch);

  function onSent(connection, text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      frame = text;
    }
    // Keep-alive traffic is not activity: with pings on, the chat would
    // never look quiescent.
    if (frame?.type !== 'ping') touch();
    if (frame?.type !== 'message') {
      const record = receiving();
      (record ? record.sent : recorder.sent).push(summarizeSent(frame));
      return;
    }
    const request = { method: 'WS', url: connection.url, headers: headers ?? {}, body: frame };
    if (recorder.records.length >= maxRequests) {
      recorder.loop = true;
      recorder.loopRequest = request;
      throw new LoopGuardError(`loop guard: more than ${maxRequests} requests (maxRequests)`);
    }
    recorder.records.push({
      request,
      connection: recorder.connections.indexOf(connection),
      frames: [],
      controls: [],
      sent: [],
      pending: true,
      refused: null,
      closedBeforeDone: null,
      stop: recorder.armedStop,
      stopped: false,
      deliveredChunks: 0,
    });
    recorder.armedStop = null;
  }

  function onReceived(text) {
    const events = frameEvents(text);
    const record = receiving();
    if (events.length === 0) {
      let frame;
      try {
        frame = JSON.parse(text);
      } catch {
        frame = text;
      }
      if (frame?.type !== 'pong') touch();
      recorder.controls.push({ request: indexOf(record), frame });
      record?.controls.push(frame);
      // An error frame that answers a request refuses it: the newest request
      // with no frames yet (a message sent while another response streamed,
      // or the only one). Heuristic: the frame names no request.
      const newest = recorder.records.findLast(r => r.pending);
      if (frame?.type === 'error' && newest != null && newest.frames.length === 0) {
        newest.refused = frame.message ?? null;
        newest.pending = false;
      }
      return;
    }
    touch();
    if (record == null) {
      recorder.strayFrames.push({ afterRequest: recorder.records.length - 1, frame: text });
      return;
    }
    record.frames.push(text);
    if (events.includes('[DONE]')) record.pending = false;
    if (record.stop == null || record.stopped) return;
    record.deliveredChunks += events.filter(data => data !== '[DONE]').length;
    hold.cutIfDue(record);
  }

  const onClose = closeRecorder(recorder, touch, 'closedBeforeDone');

  recorder.WebSocket = recordingSocketClass(WebSocket, {
    recorder, touch, hold, onReceived, onSent, onClose,
    options: headers ? { headers } : {},
    binaryFrame: { binary: true },
  });

  return recorder;
}

// ---------------------------------------------------------------------------
// Recorder for ai 7's stock WebSocketChatTransport: the same kind of `ws`
// subclass, but requests are correlated by the `requestId` every frame
// carries (the transport multiplexes chats and requests over one socket).
// A `send` or `resume` frame opens a request record; `abort` marks it; every
// frame received goes to the record of its requestId.
// ---------------------------------------------------------------------------

const STOCK_RESPONSE_TYPES = new Set(['start', 'chunk', 'end', 'error', 'no-active']);
const STOCK_TERMINAL_TYPES = new Set(['end', 'error', 'no-active']);

function parseJson(text) {
  try {
    return { value: JSON.parse(text) };
  } catch (error) {
    return { error: errorMessage(error) };
  }
}

function createStockWsRecorder({ maxRequests, touch, WebSocket }) {
  const recorder = {
    records: [],
    byRequestId: new Map(),
    connections: [],
    sent: [], // frames sent that open no request and name none we know
    strayFrames: [], // frames received that belong to no request we sent
    loop: false,
    loopRequest: null,
    armedStop: null, // {afterChunks, onCut} for the next request
    get inFlight() {
      return this.records.filter(record => record.pending).length;
    },
  };

  // As for our transport: after a stop's cut, every frame waits until the
  // chat has stopped, then goes to the transport, which must ignore it.
  const hold = createHold(touch);

  function onSent(connection, text) {
    touch();
    const { value: frame } = parseJson(text);
    const type = frame?.type;
    if (type === 'send' || type === 'resume') {
      const request = { method: 'WS', url: connection.url, headers: frame.headers ?? {}, body: frame };
      if (recorder.records.length >= maxRequests) {
        recorder.loop = true;
        recorder.loopRequest = request;
        throw new LoopGuardError(`loop guard: more than ${maxRequests} requests (maxRequests)`);
      }
      const record = {
        kind: type,
        requestId: frame.requestId,
        request,
        connection: recorder.connections.indexOf(connection),
        frames: [],
        sent: [],
        pending: true,
        ended: null,
        errorText: null,
        aborted: false,
        framesAfterAbort: 0,
        closedBeforeEnd: null,
        frameProblems: [],
        stop: recorder.armedStop,
        stopped: false,
        deliveredChunks: 0,
      };
      recorder.armedStop = null;
      recorder.records.push(record);
      recorder.byRequestId.set(frame.requestId, record);
      return;
    }
    const record = recorder.byRequestId.get(frame?.requestId);
    if (record == null) {
      recorder.sent.push(frame ?? text);
      return;
    }
    record.sent.push(frame);
    if (type === 'abort') {
      record.aborted = true;
      // The transport has closed the request's stream; whatever the server
      // still sends for it is recorded but waited for no longer.
      record.pending = false;
    }
  }

  function onReceived(text) {
    touch();
    const parsed = parseJson(text);
    const frame = parsed.value;
    const record =
      typeof frame?.requestId === 'string' ? recorder.byRequestId.get(frame.requestId) : undefined;
    if (record == null) {
      const problem =
        parsed.error != null
          ? `not JSON: ${parsed.error}`
          : typeof frame?.requestId !== 'string'
            ? 'no string requestId'
            : 'a requestId this client never sent';
      recorder.strayFrames.push({ afterRequest: recorder.records.length - 1, problem, frame: frame ?? text });
      return;
    }
    const index = record.frames.length;
    record.frames.push(frame);
    if (record.aborted) record.framesAfterAbort++;
    const problem = message => record.frameProblems.push({ frameIndex: index, problem: message });
    if (!STOCK_RESPONSE_TYPES.has(frame.type)) problem(`unknown frame type ${JSON.stringify(frame.type)}`);
    if (record.ended != null) problem(`${frame.type} after ${record.ended}`);
    if (frame.type === 'chunk') {
      const before = record.frames.slice(0, index).filter(f => f.type === 'chunk').length;
      if (!Number.isSafeInteger(frame.sequence) || frame.sequence !== before) {
        problem(`chunk sequence ${JSON.stringify(frame.sequence)}, expected ${before}`);
      }
    }
    if (frame.type === 'error' && frame.errorText !== undefined && typeof frame.errorText !== 'string') {
      problem('errorText is not a string');
    }
    if (STOCK_TERMINAL_TYPES.has(frame.type) && record.ended == null) {
      record.ended = frame.type;
      if (frame.type === 'error') record.errorText = frame.errorText ?? null;
      record.pending = false;
    }
    if (frame.type !== 'chunk' || record.stop == null || record.stopped) return;
    record.deliveredChunks++;
    hold.cutIfDue(record);
  }

  const onClose = closeRecorder(recorder, touch, 'closedBeforeEnd');

  recorder.WebSocket = recordingSocketClass(WebSocket, {
    recorder, touch, hold, onReceived, onSent, onClose,
    options: {},
    binaryFrame: { problem: 'binary frame' },
  });

  return recorder;
}

// ---------------------------------------------------------------------------
// Job handling
// ---------------------------------------------------------------------------

function validateJob(job) {
  const problems = [];
  if (typeof job?.api !== 'string') problems.push('"api" must be a string');
  const transport = job?.transport ?? 'http';
  if (!TRANSPORTS.has(transport)) {
    problems.push(`"transport" must be one of ${[...TRANSPORTS]}`);
  }
  // Options and steps of our /live envelope: our transport only.
  const wsOnly = ['closeStreamAt', 'pingIntervalMs', 'sendOnlyLastMessages'];
  for (const key of wsOnly) {
    if (job?.[key] !== undefined && transport !== 'ws') {
      problems.push(`"${key}" needs "transport": "ws"`);
    }
  }
  const lastOnly = job?.lastMessageOnly;
  if (lastOnly !== undefined && !['recipe', 'messages'].includes(lastOnly)) {
    problems.push('"lastMessageOnly" must be "recipe" or "messages"');
  }
  if (lastOnly === 'recipe' && transport !== 'http') {
    problems.push('"lastMessageOnly": "recipe" is a POST body: it needs "transport": "http"');
  }
  const client = job?.client ?? '6';
  if (!(client in CLIENT_PACKAGES)) {
    problems.push(`"client" must be one of ${Object.keys(CLIENT_PACKAGES)}`);
  }
  if (transport === 'ws-stock' && !isV7(client)) {
    problems.push('"transport": "ws-stock" is ai 7\'s own transport: it needs "client": "7"');
  }
  const mode = job?.sendAutomaticallyWhen ?? 'none';
  if (!AUTO_SEND_MODES.has(mode)) {
    problems.push(`"sendAutomaticallyWhen" must be one of ${[...AUTO_SEND_MODES]}`);
  }
  if (!Array.isArray(job?.steps)) problems.push('"steps" must be an array');
  for (const [i, step] of (job?.steps ?? []).entries()) {
    if (!ACTIONS.has(step?.action)) {
      problems.push(`steps[${i}].action must be one of ${[...ACTIONS]}`);
    }
    if (step?.action === 'audio' && transport !== 'ws') {
      problems.push(`steps[${i}]: "audio" needs "transport": "ws"`);
    }
    if (step?.action === 'interrupt' && transport === 'ws-stock') {
      problems.push(`steps[${i}]: "interrupt" is our /live envelope's; use "stop" with "ws-stock"`);
    }
  }
  if (problems.length > 0) throw new Error(`invalid job: ${problems.join('; ')}`);
}

function buildSendAutomaticallyWhen(ai, mode, running = new Set()) {
  const approvals = ai.lastAssistantMessageIsCompleteWithApprovalResponses;
  const toolCalls = ai.lastAssistantMessageIsCompleteWithToolCalls;
  switch (mode) {
    case 'approvals':
      return approvals;
    case 'tool-calls':
      return toolCalls;
    case 'both':
      // Synchronous on purpose: 6.0.25 calls this without awaiting it.
      return options => approvals(options) || toolCalls(options);
    case 'seed':
      return options => seedRules(ai, options);
    case 'add-output':
      // README's add-output pattern: both helpers, but never while the page still runs an
      // approved browser tool (its approval went already; its output comes with addToolOutput).
      return options =>
        !options.messages.at(-1)?.parts.some(
          part => ai.isToolUIPart(part) && running.has(part.toolCallId),
        ) && (approvals(options) || toolCalls(options));
    default:
      return undefined;
  }
}

// The resubmission rules of the seed documents (ADR 0006: text, approval,
// pending, error, output, default), applied to v6 tool parts: the seeds'
// separate confirmation part is the `approval` a v6 tool part carries.
function seedRules(ai, { messages }) {
  const last = messages.at(-1);
  if (last == null || last.role !== 'assistant') return false;
  if (last.parts.some(part => part.type === 'text')) return false; // 1: answered
  const tools = last.parts.filter(ai.isToolUIPart);
  if (!tools.some(part => typeof part.approval?.approved === 'boolean')) return false; // 2
  if (tools.some(part => part.state === 'approval-requested')) return false; // 3: wait
  if (tools.some(part => part.state === 'output-error')) return false; // 4
  return true; // 5: a browser output to send, or else the approval itself
}

// Tool parts matching an optional tool name and/or tool call id.
function findToolParts(ai, messages, { toolName, toolCallId, state }) {
  const found = [];
  for (const message of messages) {
    for (const part of message.parts) {
      if (!ai.isToolUIPart(part)) continue;
      if (state != null && part.state !== state) continue;
      if (toolName != null && ai.getToolName(part) !== toolName) continue;
      if (toolCallId != null && part.toolCallId !== toolCallId) continue;
      found.push(part);
    }
  }
  return found;
}

function describeFilter(step) {
  return JSON.stringify({ toolName: step.toolName, toolCallId: step.toolCallId });
}

// Client-generated message ids are random, so a job can name a message by its
// position instead: `messageIndex` (negative counts from the end).
function targetMessageId(chat, step) {
  if (step.messageId !== undefined) return step.messageId;
  if (step.messageIndex === undefined) return undefined;
  const message = chat.messages.at(step.messageIndex);
  if (message == null) throw new Error(`no message at index ${step.messageIndex}`);
  return message.id;
}

async function runStep(ctx, step) {
  const { ai, chat } = ctx;
  switch (step.action) {
    case 'send': {
      const message = {};
      if (step.text !== undefined) message.text = step.text;
      if (step.files !== undefined) message.files = step.files;
      const messageId = targetMessageId(chat, step);
      if (messageId !== undefined) message.messageId = messageId;
      if (step.stopOnServerAfterMs !== undefined) {
        setTimeout(() => void stopOnServer(ctx), step.stopOnServerAfterMs);
      }
      return chat.sendMessage(message);
    }
    case 'regenerate': {
      const messageId = targetMessageId(chat, step);
      return chat.regenerate(messageId !== undefined ? { messageId } : {});
    }
    case 'approve': {
      const last = chat.messages.at(-1);
      const parts = findToolParts(ai, last ? [last] : [], {
        ...step,
        state: 'approval-requested',
      });
      if (parts.length === 0) {
        throw new Error(
          `approve: no tool part in state approval-requested in the last message matches ${describeFilter(step)}`,
        );
      }
      // `approved` may be a list: one decision per matching part, in order.
      const decisions = Array.isArray(step.approved)
        ? step.approved
        : parts.map(() => step.approved ?? true);
      if (decisions.length !== parts.length) {
        throw new Error(`approve: ${decisions.length} decisions for ${parts.length} parts`);
      }
      for (const [index, part] of parts.entries()) {
        if (step.payload !== undefined) {
          // The user edited the confirmation's payload: the page adds it to the message the
          // decision goes in, as a data part (ADR 0041); addToolApprovalResponse keeps it.
          const answer = {
            type: 'data-approval-response',
            id: part.approval.id,
            data: { payload: step.payload },
          };
          chat.messages = chat.messages.map(message =>
            message.id === last.id ? { ...message, parts: [...message.parts, answer] } : message,
          );
        }
        const sentBefore = ctx.recorder.records?.length ?? 0;
        await chat.addToolApprovalResponse({
          id: part.approval.id,
          approved: decisions[index],
          ...(step.reason !== undefined ? { reason: step.reason } : {}),
        });
        // An app that runs the tool as the user approves sends approval and output together
        // (a denied one does not run: in a list of decisions, only the approved ones).
        const runs = !Array.isArray(step.approved) || decisions[index];
        if (runs && (step.output !== undefined || step.errorText !== undefined)) {
          if (step.outputFrame && decisions[index]) {
            // The predecessor's page (our envelope): the output as a `tool_result` frame on
            // the chat's socket, right after the approval's `message` frame has gone out.
            while (ctx.recorder.records.length <= sentBefore) await sleep(1);
            if (step.outputFrameDelayMs) await sleep(step.outputFrameDelayMs);
            const socket = ctx.recorder.sockets?.at(-1);
            if (socket == null) throw new Error('approve: outputFrame needs "transport": "ws"');
            socket.send(JSON.stringify({
              type: 'tool_result', toolCallId: part.toolCallId, result: step.output ?? {},
            }));
          }
          if (step.runMs && decisions[index]) {
            // The page runs the tool for a while: its approval has gone, its output follows.
            ctx.running.add(part.toolCallId);
            await sleep(step.runMs);
            ctx.running.delete(part.toolCallId);
          }
          await chat.addToolOutput(toolOutputArgs(ai.getToolName(part), part.toolCallId, step));
        }
      }
      return;
    }
    case 'toolOutput': {
      // Prefer the newest match: that is the part the user is looking at.
      const parts = findToolParts(ai, chat.messages, step);
      const part = parts.at(-1);
      if (part == null) {
        throw new Error(`toolOutput: no tool part matches ${describeFilter(step)}`);
      }
      return chat.addToolOutput(
        toolOutputArgs(ai.getToolName(part), part.toolCallId, step),
      );
    }
    case 'resume':
      // What `useChat({ resume: true })` does on mount: GET {api}/{chatId}/stream, then
      // the replayed response rebuilt from its start (204: nothing to resume).
      return chat.resumeStream();
    case 'wait':
      // The user takes their time (e.g. longer than the server's approval timeout).
      await sleep(step.ms ?? 1000);
      return;
    case 'stop':
    case 'interrupt':
      // Steps run one at a time, so a stop arms the NEXT response: it is cut
      // after `afterChunks` chunks and the chat is stopped, like a user
      // pressing stop mid-stream (over "ws" the transport then sends an
      // `interrupt` frame).
      ctx.recorder.armedStop = {
        afterChunks: step.afterChunks ?? 1,
        onCut: () => stopWhenApplied(ctx),
      };
      return;
    case 'audio':
      return sendAudio(ctx, step);
    case 'reload':
      return reloadPage(ctx, step);
    default:
      throw new Error(`unknown action ${step.action}`);
  }
}

// Another tab (or the server's admin) stops the chat's answer: DELETE
// {origin}/stream/{chatId}/stream, which reaches the run on any transport. The
// status goes into the report's `serverStops`.
async function stopOnServer(ctx) {
  const origin = new URL(ctx.job.api.replace(/^ws/, 'http')).origin;
  const url = `${origin}/stream/${encodeURIComponent(ctx.job.chatId)}/stream`;
  try {
    const response = await fetch(url, { method: 'DELETE', headers: ctx.job.headers ?? {} });
    ctx.serverStops.push(response.status);
  } catch (error) {
    ctx.serverStops.push(errorMessage(error));
  }
}

// A voice turn over "ws": optionally the message that opens the request, then
// the microphone's audio as the protocol frames it.
async function sendAudio(ctx, step) {
  const { chat, transport, recorder } = ctx;
  const sampleRate = step.sampleRate ?? 16000;
  let request;
  if (step.withMessage) {
    const before = recorder.records.length;
    request = chat.sendMessage({ parts: [{ type: 'data-voice', data: { sampleRate } }] });
    // The audio must follow the message frame on the socket.
    while (recorder.records.length === before && chat.status !== 'error' && !recorder.loop) {
      await sleep(POLL_MS);
    }
  }
  await transport.sendAudioControl('start');
  for (const pcm of sinePcm16(step.chunks ?? 10, sampleRate)) {
    await transport.sendAudioChunk(pcm, sampleRate);
  }
  await transport.sendAudioControl('stop');
  await request;
}

// `count` chunks of 100 ms of a 440 Hz sine at 30% of full scale, PCM16 LE mono.
function* sinePcm16(count, sampleRate) {
  const perChunk = Math.round(sampleRate / 10);
  let n = 0;
  for (let c = 0; c < count; c++) {
    const bytes = new Uint8Array(perChunk * 2);
    const view = new DataView(bytes.buffer);
    for (let i = 0; i < perChunk; i++, n++) {
      const value = Math.sin((2 * Math.PI * 440 * n) / sampleRate) * 0.3 * 32767;
      view.setInt16(i * 2, Math.round(value), true);
    }
    yield bytes;
  }
}

function approvedInChat(chat, toolCallId) {
  const part = chat.messages
    .flatMap(message => message.parts)
    .find(candidate => candidate.toolCallId === toolCallId);
  return part?.approval?.approved === true;
}

function toolOutputArgs(toolName, toolCallId, spec) {
  if (spec.errorText !== undefined) {
    return {
      state: 'output-error',
      tool: toolName,
      toolCallId,
      errorText: spec.errorText,
    };
  }
  return { tool: toolName, toolCallId, output: spec.output ?? null };
}

async function stopWhenApplied(ctx) {
  const cutAt = Date.now();
  while (
    Date.now() - cutAt < STOP_QUIET_MS ||
    Date.now() - ctx.lastStateChange < STOP_QUIET_MS
  ) {
    await sleep(POLL_MS);
  }
  log('stop: aborting the response');
  await ctx.chat.stop();
}

const isSettledStatus = status => status === 'ready' || status === 'error';

// Quiescent: settled status, nothing in flight, nothing happened for SETTLE_MS.
async function waitForQuiescence(ctx) {
  for (;;) {
    const idle =
      isSettledStatus(ctx.chat.status) && ctx.recorder.inFlight === 0;
    if (idle && Date.now() - ctx.lastActivity >= SETTLE_MS) return;
    await sleep(POLL_MS);
  }
}

async function runSteps(ctx, steps) {
  for (const [index, step] of steps.entries()) {
    if (ctx.recorder.loop) break;
    const firstRequest = ctx.recorder.records.length;
    const result = { index, action: step.action, error: null };
    ctx.stepResults.push(result);
    log(`step ${index}: ${step.action}`);
    ctx.touch();
    try {
      await runStep(ctx, step);
    } catch (error) {
      result.error = errorMessage(error);
      log(`step ${index} failed: ${result.error}`);
    }
    await waitForQuiescence(ctx);
    result.requests = range(firstRequest, ctx.recorder.records.length);
    result.status = ctx.chat.status;
  }
}

const range = (from, to) => Array.from({ length: to - from }, (_, i) => from + i);

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

// The chunks of a list of SSE event payloads, and entries for validation.
function chunksOf(events) {
  const chunkEntries = [];
  const chunks = [];
  events.forEach((raw, eventIndex) => {
    if (raw === '[DONE]') return;
    try {
      const value = JSON.parse(raw);
      chunkEntries.push({ index: chunks.length, eventIndex, value });
      chunks.push(value);
    } catch (error) {
      chunkEntries.push({ eventIndex, raw, parseError: errorMessage(error) });
    }
  });
  return { chunks, chunkEntries };
}

async function buildRequestReport(record, schemas) {
  const { events, undispatchedTail } = parseSseEvents(record.rawBody);
  const { chunks, chunkEntries } = chunksOf(events);
  const report = {
    request: record.request,
    status: record.status,
    responseHeaders: record.responseHeaders,
    rawBody: record.rawBody,
    events,
    chunks,
    endsWithDone: events.at(-1) === '[DONE]',
    endsWithBlankLine: /(\r\n|\n|\r)(\r\n|\n)$/.test(record.rawBody),
    undispatchedTail,
    violations: await violationsByClient(schemas, chunkEntries),
    bodyError: record.bodyError,
    networkError: record.networkError,
    stopped: record.stopped,
  };
  if (record.stopped) report.deliveredChunks = record.deliveredChunks;
  return report;
}

async function buildWsRequestReport(record, schemas) {
  const events = [];
  const frameProblems = [];
  record.frames.forEach((frame, frameIndex) => {
    const found = frameEvents(frame);
    if (found.length !== 1) {
      frameProblems.push({ frameIndex, problem: `${found.length} SSE events in one frame` });
    }
    if (!frame.endsWith('\n\n')) {
      frameProblems.push({ frameIndex, problem: 'frame does not end with a blank line' });
    }
    events.push(...found);
  });
  const { chunks, chunkEntries } = chunksOf(events);
  const report = {
    transport: 'ws',
    request: record.request,
    connection: record.connection,
    frames: record.frames,
    events,
    chunks,
    endsWithDone: events.at(-1) === '[DONE]',
    frameProblems,
    violations: await violationsByClient(schemas, chunkEntries),
    controls: record.controls,
    sent: record.sent,
    refused: record.refused,
    closedBeforeDone: record.closedBeforeDone,
    stopped: record.stopped,
  };
  if (record.stopped) report.deliveredChunks = record.deliveredChunks;
  return report;
}

async function buildStockWsRequestReport(record, schemas) {
  const chunkFrames = record.frames.filter(frame => frame.type === 'chunk');
  const chunks = chunkFrames.map(frame => frame.chunk);
  const chunkEntries = chunks.map((value, index) => ({ index, eventIndex: index, value }));
  const report = {
    transport: 'ws-stock',
    kind: record.kind,
    requestId: record.requestId,
    request: record.request,
    connection: record.connection,
    frames: record.frames,
    frameTypes: record.frames.map(frame => frame.type),
    chunks,
    sequences: chunkFrames.map(frame => frame.sequence),
    ended: record.ended,
    errorText: record.errorText,
    frameProblems: record.frameProblems,
    violations: await violationsByClient(schemas, chunkEntries),
    sent: record.sent,
    aborted: record.aborted,
    framesAfterAbort: record.framesAfterAbort,
    closedBeforeEnd: record.closedBeforeEnd,
    stopped: record.stopped,
  };
  if (record.stopped) report.deliveredChunks = record.deliveredChunks;
  return report;
}

const REQUEST_REPORTS = {
  http: buildRequestReport,
  ws: buildWsRequestReport,
  'ws-stock': buildStockWsRequestReport,
};

async function buildReport(ctx, { timeout }) {
  // Snapshot the chat first: after a timeout it may still be changing.
  const chatSnapshot = {
    messages: JSON.parse(JSON.stringify(ctx.chat.messages)),
    status: ctx.chat.status,
    error: ctx.chat.error ? errorMessage(ctx.chat.error) : null,
  };
  const requests = [];
  for (const record of ctx.recorder.records) {
    requests.push(await REQUEST_REPORTS[ctx.transportKind](record, ctx.schemas));
  }
  let ws;
  if (ctx.transportKind === 'ws') {
    ws = {
      connections: ctx.recorder.connections,
      controls: ctx.recorder.controls,
      onControl: ctx.onControlFrames,
      sent: ctx.recorder.sent,
      strayFrames: ctx.recorder.strayFrames,
    };
  } else if (ctx.transportKind === 'ws-stock') {
    ws = {
      connections: ctx.recorder.connections,
      sent: ctx.recorder.sent,
      strayFrames: ctx.recorder.strayFrames,
    };
  }
  return {
    transport: ctx.transportKind,
    client: ctx.client,
    clientVersion: ctx.clientVersion,
    requests,
    ...chatSnapshot,
    errors: ctx.errors,
    finishReasons: ctx.finishes.map(f => f.finishReason ?? null),
    serverStops: ctx.serverStops,
    reloads: ctx.reloads,
    finishes: ctx.finishes,
    onFinishCount: ctx.finishes.length,
    onData: ctx.dataParts,
    loop: ctx.recorder.loop,
    loopRequest: ctx.recorder.loopRequest,
    timeout,
    toolCalls: ctx.toolCalls,
    steps: ctx.stepResults,
    statusHistory: ctx.state.statusHistory,
    ...(ws ? { ws } : {}),
  };
}

// ---------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------

// The installed version, read from the package itself (the alias hides it).
function installedVersion(packageName) {
  const url = new URL(`./node_modules/${packageName}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(url, 'utf8')).version;
}

// Our transport, with its `ai` import resolved to `clientPackage` (see RESOLVE_HOOK).
async function importWsTransport(clientPackage) {
  const url = new URL(WS_TRANSPORT_MODULE);
  url.search = `?ai=${encodeURIComponent(clientPackage)}`;
  try {
    return await import(url.href);
  } catch (error) {
    throw new Error(
      `cannot load the WebSocket transport (${errorMessage(error)}): ` +
        'run `npm ci` in client/ (it builds client/dist), then `npm ci` here',
    );
  }
}

// Closes the socket the way an app leaving the page would, and gives the
// close a moment to be recorded.
async function closeWsTransport(ctx) {
  ctx.transport.close();
  const until = Date.now() + 500;
  while (
    ctx.recorder.connections.some(c => c.opened && c.close == null) &&
    Date.now() < until
  ) {
    await sleep(POLL_MS);
  }
}

// Every client's chunk schema, by client name: each request is checked against all of them.
let chunkSchemas;
async function loadChunkSchemas() {
  if (chunkSchemas == null) {
    chunkSchemas = {};
    for (const [client, alias] of Object.entries(CLIENT_PACKAGES)) {
      chunkSchemas[client] = (await import(alias)).uiMessageChunkSchema();
    }
  }
  return chunkSchemas;
}

async function createContext(job) {
  const client = job.client ?? '6';
  const clientPackage = CLIENT_PACKAGES[client];
  const ai = await import(clientPackage);

  const ctx = {
    ai,
    transportKind: job.transport ?? 'http',
    client,
    clientVersion: installedVersion(clientPackage),
    schemas: await loadChunkSchemas(),
    lastActivity: Date.now(),
    lastStateChange: Date.now(),
    errors: [],
    finishes: [],
    dataParts: [],
    toolCalls: [],
    running: new Set(), // browser tools the page runs now (approve steps with an output)
    stepResults: [],
    serverStops: [],
    reloads: [],
    job,
  };
  ctx.touch = () => {
    ctx.lastActivity = Date.now();
  };
  const maxRequests = job.maxRequests ?? DEFAULT_MAX_REQUESTS;
  // One recorder for the whole job: a reload's new chat and transport record into it too.
  if (ctx.transportKind === 'ws') {
    const { WebSocket } = await import('ws');
    ctx.recorder = createWsRecorder({ maxRequests, touch: ctx.touch, WebSocket, headers: job.headers });
    ctx.onControlFrames = [];
    ctx.WsTransport = (await importWsTransport(clientPackage)).WebSocketChatTransport;
  } else if (ctx.transportKind === 'ws-stock') {
    const { WebSocket } = await import('ws');
    ctx.recorder = createStockWsRecorder({ maxRequests, touch: ctx.touch, WebSocket });
  } else {
    ctx.recorder = createRecorder({ maxRequests, touch: ctx.touch });
  }
  ctx.transport = createTransport(ctx);
  ctx.chat = createChat(ctx, job.initialMessages);
  return ctx;
}

// The page's transport, recording into the job's recorder.
function createTransport(ctx) {
  const { ai, job } = ctx;
  if (ctx.transportKind === 'ws') {
    return new ctx.WsTransport({
      url: job.api,
      WebSocket: ctx.recorder.WebSocket,
      // Validate with the chosen client's schema, as its DefaultChatTransport would.
      chunkSchema: ai.uiMessageChunkSchema,
      ...(job.body !== undefined ? { body: job.body } : {}),
      closeStreamAt: job.closeStreamAt,
      pingIntervalMs: job.pingIntervalMs,
      sendOnlyLastMessages: job.sendOnlyLastMessages ?? job.lastMessageOnly === 'messages',
      onControl: frame => {
        ctx.onControlFrames.push(frame);
        if (frame?.type !== 'pong') ctx.touch();
      },
    });
  }
  if (ctx.transportKind === 'ws-stock') {
    return new ai.WebSocketChatTransport({
      url: job.api,
      webSocket: ctx.recorder.WebSocket,
      ...(job.headers !== undefined ? { headers: job.headers } : {}),
      ...(job.body !== undefined ? { body: job.body } : {}),
      ...(job.lastMessageOnly === 'messages'
        ? { prepareSendMessagesRequest: ({ messages }) => ({ messages: messages.slice(-1) }) }
        : {}),
    });
  }
  return new ai.DefaultChatTransport({
    api: job.api,
    headers: job.headers,
    ...(job.body !== undefined ? { body: job.body } : {}),
    ...(job.lastMessageOnly !== undefined
      ? { prepareSendMessagesRequest: lastMessageRequest(job.lastMessageOnly) }
      : {}),
    fetch: ctx.recorder.fetch,
  });
}

// POST /stream's body with only the chat's last message: the recipe's `message`, or
// `messages: [last]`; the trigger and the message id go along (a regeneration, an edit).
function lastMessageRequest(mode) {
  return ({ id, messages, body, trigger, messageId }) => ({
    body: {
      ...body,
      id,
      ...(mode === 'recipe' ? { message: messages.at(-1) } : { messages: messages.slice(-1) }),
      trigger,
      messageId,
    },
  });
}

// The page's chat (what useChat({ id, messages }) builds), over ctx.transport; its state
// records into ctx.state's status history.
function createChat(ctx, messages) {
  const { ai, job } = ctx;
  const statusHistory = ctx.state?.statusHistory ?? [];
  ctx.state = new MemoryChatState(() => {
    ctx.lastStateChange = Date.now();
    ctx.touch();
  }, statusHistory);
  if (messages !== undefined) ctx.state.messages = messages;
  const toolOutputs = job.toolOutputs ?? {};
  const chat = new ai.AbstractChat({
    id: job.chatId,
    state: ctx.state,
    transport: ctx.transport,
    sendAutomaticallyWhen: buildSendAutomaticallyWhen(
      ai,
      job.sendAutomaticallyWhen ?? 'none',
      ctx.running,
    ),
    onToolCall: ({ toolCall }) => {
      ctx.toolCalls.push({
        toolName: toolCall.toolName,
        toolCallId: toolCall.toolCallId,
        input: toolCall.input,
      });
      const spec = toolOutputs[toolCall.toolName];
      if (spec == null || toolCall.providerExecuted) return;
      if (spec.afterApproval && !approvedInChat(chat, toolCall.toolCallId)) {
        return; // a tool that needs approval runs only once the user approved it
      }
      // Not awaited: addToolOutput queues behind the job running this
      // callback, so awaiting it here would deadlock the chat.
      void chat.addToolOutput(
        toolOutputArgs(toolCall.toolName, toolCall.toolCallId, spec),
      );
    },
    onFinish: ({ finishReason, isAbort, isDisconnect, isError }) => {
      ctx.finishes.push({
        finishReason: finishReason ?? null,
        isAbort: Boolean(isAbort),
        isDisconnect: Boolean(isDisconnect),
        isError: Boolean(isError),
      });
    },
    onError: error => {
      ctx.errors.push(errorMessage(error));
    },
    // Every data part as useChat's onData gets it, transient ones (kept in no message) too.
    onData: part => {
      ctx.dataParts.push({ type: part.type, id: part.id ?? null, transient: Boolean(part.transient) });
    },
  });
  return chat;
}

// A page reload: the chat and its transport (its socket) are gone; the new page reads the
// chat back (GET {origin}/chats/{chatId}) and builds a new chat with the same id, transport
// kind and client on those messages, which the later steps use. `reloads` in the report.
async function reloadPage(ctx, step) {
  if (ctx.transportKind !== 'http') await closeWsTransport(ctx);
  // The new page loads before it reads the chat: meanwhile the server lets the old socket go
  // (on our envelope that ends the calls it left waiting, and the chat's record says so).
  await sleep(PAGE_LOAD_MS);
  const origin = new URL(ctx.job.api.replace(/^ws/, 'http')).origin;
  const url = `${origin}/chats/${encodeURIComponent(ctx.job.chatId)}`;
  const response = await fetch(url, { headers: ctx.job.headers ?? {} });
  const body = await response.json();
  ctx.reloads.push({ afterRequest: ctx.recorder.records.length - 1, status: response.status });
  if (!response.ok) throw new Error(`reload: GET ${url} answered ${response.status}`);
  ctx.transport = createTransport(ctx);
  // The README's recipe: a page that resumes an active answer starts without the message
  // that answer continues, since the replay rebuilds it (docs/adr/0045).
  const continued = step.resume && body.active && body.messages.at(-1)?.role === 'assistant';
  ctx.chat = createChat(ctx, continued ? body.messages.slice(0, -1) : body.messages);
}

async function readStdin() {
  let text = '';
  process.stdin.setEncoding('utf8');
  for await (const piece of process.stdin) text += piece;
  return text;
}

function writeAndExit(report, code) {
  process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(code));
}

// Unhandled promise rejections while serving jobs (see serve()).
const rejections = [];

// One job, start to end: its report.
async function runJob(job) {
  if (job.fold !== undefined) {
    // A fold check (fold-check.mjs): one response folded into a chat, no server.
    const rejectionsBefore = rejections.length;
    const report = await runFoldJob(job.fold);
    report.unhandledRejections = rejections.slice(rejectionsBefore);
    return report;
  }
  validateJob(job);
  const ctx = await createContext(job);
  const timeoutMs = job.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const rejectionsBefore = rejections.length;

  let timer;
  const timedOut = new Promise(resolve => {
    timer = setTimeout(() => resolve(true), timeoutMs);
  });
  const finished = runSteps(ctx, job.steps).then(() => false);
  const timeout = await Promise.race([finished, timedOut]);
  clearTimeout(timer);

  if (timeout) {
    // Report the chat as it is now; exiting closes any open connection.
    log(`timeout after ${timeoutMs} ms`);
  } else {
    // Every body has ended (quiescence), but let the readers finish.
    await Promise.all(ctx.recorder.records.map(r => r.done));
  }
  // After a timeout the chat is reported as it is, so leave the socket alone.
  if (ctx.transportKind !== 'http' && !timeout) await closeWsTransport(ctx);
  const report = await buildReport(ctx, { timeout });
  // A rejection nobody handled would end a single job's process (exit code 1); serving
  // many, it is reported with every job that was running when it happened.
  report.unhandledRejections = rejections.slice(rejectionsBefore);
  return report;
}

async function main() {
  const job = JSON.parse(await readStdin());
  writeAndExit(await runJob(job), 0);
}

// `--serve`: one job per line on stdin ({"id", "job"}), run as they come, concurrently; one
// line per finished job on stdout ({"id", "report"} or {"id", "error"}). Ends when stdin does
// and every job has finished. Saves starting Node and importing `ai` for every job.
async function serve() {
  process.on('unhandledRejection', reason => {
    const text = reason?.stack ?? String(reason);
    log(`unhandled rejection: ${text}`);
    rejections.push(text);
  });
  const { createInterface } = await import('node:readline');
  const running = new Set();
  const answer = line =>
    new Promise(resolve => process.stdout.write(`${JSON.stringify(line)}\n`, resolve));
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (!line.trim()) continue;
    const { id, job } = JSON.parse(line);
    const task = runJob(job)
      .then(report => answer({ id, report }))
      .catch(error => answer({ id, error: error?.stack ?? String(error) }))
      .finally(() => running.delete(task));
    running.add(task);
  }
  await Promise.all(running);
  process.exit(0);
}

(process.argv.includes('--serve') ? serve() : main()).catch(error => {
  log(error?.stack ?? String(error));
  process.exit(2);
});
