/**
 * A `ChatTransport` for AI SDK v6 `useChat` / `AbstractChat` that speaks the
 * `WS /live` protocol of adk-stream-protocol (docs/live-protocol.md, version 1).
 *
 * One WebSocket per chat, reused across turns. Every `sendMessages` call sends
 * one `message` frame (the body `DefaultChatTransport` would POST) and returns
 * the chunks of exactly one response: the server frames each chunk as one SSE
 * event (`data: {json}\n\n`) and ends every response with `data: [DONE]\n\n`.
 * Closing the per-response stream there is what lets the chat become `ready`
 * and run `sendAutomaticallyWhen` (approvals, browser tools).
 *
 * Behaviour worth knowing:
 * - The socket opens lazily on the first request. If it drops between
 *   responses, the next request (or audio frame) opens a new one; a drop
 *   during a response errors that response's stream.
 * - Requests are serialised: a response whose stream was closed early (stop,
 *   `closeStreamAt`, an error) still runs on the server until its `[DONE]`, and
 *   the server refuses a `message` while a response streams, so the next
 *   `message` waits for that `[DONE]`.
 */
import {
  JSONParseError,
  TypeValidationError,
  uiMessageChunkSchema,
  type ChatTransport,
  type UIMessage,
  type UIMessageChunk,
} from 'ai';

/** The part of the browser `WebSocket` the transport uses (the `ws` package has it too). */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(
    type: 'open' | 'message' | 'close' | 'error',
    listener: (event: any) => void,
  ): void;
}

export type WebSocketConstructor = new (
  url: string,
  protocols?: string | string[],
) => WebSocketLike;

type ValidationResult = { success: true; value: unknown } | { success: false; error: Error };

/** What the transport needs of an AI SDK `Schema`: an optional, possibly async `validate`. */
export interface ChunkSchema {
  validate?: (value: unknown) => ValidationResult | PromiseLike<ValidationResult>;
}

/** A plain-JSON (not `data:`) frame from the server: `pong`, `error`, or a future type. */
export type ControlFrame =
  | { type: 'pong'; timestamp?: unknown }
  | { type: 'error'; message: string }
  | { type: string; [key: string]: unknown };

export interface WebSocketChatTransportOptions {
  /**
   * `ws://host/live` or `wss://…`; in a browser also a path such as `/live`
   * (http(s) becomes ws(s)). `chatId` is appended as a query parameter.
   */
  url: string;
  /**
   * Accepted for symmetry with `DefaultChatTransport` and ignored: browsers
   * cannot set headers on a WebSocket. Authenticate with cookies or the URL.
   */
  headers?: Record<string, string> | Headers;
  /** Extra fields for every `message` frame (a request's `body` wins; protocol fields win over both). */
  body?: object;
  /** WebSocket sub-protocols, passed to the constructor. */
  protocols?: string | string[];
  /** The WebSocket constructor: default `globalThis.WebSocket`; in Node 20 pass e.g. the `ws` package's. */
  WebSocket?: WebSocketConstructor;
  /** Validate every chunk as `DefaultChatTransport` does, erroring the stream on failure (default true). */
  validate?: boolean;
  /**
   * The schema to validate with: default `uiMessageChunkSchema` of the `ai`
   * package this module resolves. A lazy schema (a function) is accepted.
   */
  chunkSchema?: ChunkSchema | (() => ChunkSchema);
  /** Opening the socket: `retries` more attempts after the first, `delayMs` apart (default 2, 500). */
  reconnect?: { retries: number; delayMs: number };
  /** Send `{type:"ping"}` this often while the socket is open (default: never). */
  pingIntervalMs?: number;
  /** Control frames that do not end a response: `pong`, `error` outside a response, unknown types. */
  onControl?: (frame: ControlFrame) => void;
  /**
   * Send only the last message instead of the whole history (default false).
   * Frames stay small: the server puts the chat's earlier messages from its
   * record before it (regenerate and edits included), and answers a page
   * whose chat is not the server's with an error that says to read the chat
   * again (`GET /chats/{chatId}`).
   */
  sendOnlyLastMessages?: boolean;
  /**
   * When the per-response stream closes. `"done"` (default): at `[DONE]`.
   * `"finish-step-after-approval"`: as the predecessor ("seed") client did, at
   * the first `finish-step` after a `tool-approval-request`; the rest of that
   * response (its `finish` and `[DONE]`) is read and dropped.
   */
  closeStreamAt?: 'done' | 'finish-step-after-approval';
}

/** One request, from its `message` frame until the server is done with it. */
interface OpenResponse {
  /** The socket the request went out on: frames or a close of another socket are not its own. */
  socket: WebSocketLike;
  controller: ReadableStreamDefaultController<UIMessageChunk>;
  /** The consumer's stream is open. After stop, an early close or an error, frames still come until `[DONE]`. */
  streamOpen: boolean;
  /** `data:` frames received so far (0: the server has not started answering). */
  frames: number;
  approvalRequested: boolean;
  /** Resolves when the server side is over: `[DONE]`, a refusal, or the socket closed. */
  ended: Promise<void>;
  end: () => void;
  detachAbort: () => void;
}

// WebSocket.OPEN and CLOSED; not read from the constructor, which may be injected.
const OPEN = 1;
const CLOSED = 3;

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

/** The data of the one SSE event a frame carries; undefined when it has no `data:` line (a control frame). */
function sseData(frame: string): string | undefined {
  const data: string[] = [];
  for (const line of frame.split(/\r\n|\r|\n/)) {
    if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
  }
  return data.length > 0 ? data.join('\n') : undefined;
}

/** Base64 without Node's Buffer, so the same code runs in browsers. */
function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

export class WebSocketChatTransport<UI_MESSAGE extends UIMessage>
  implements ChatTransport<UI_MESSAGE>
{
  readonly #options: WebSocketChatTransportOptions;
  readonly #schema: ChunkSchema;
  #socket: WebSocketLike | undefined;
  #opening: Promise<WebSocketLike> | undefined;
  #chatId: string | undefined;
  #response: OpenResponse | undefined;
  #sending = false;
  #pingTimer: ReturnType<typeof setInterval> | undefined;
  // A resume waiting for the server's answer: the active response's first frame, or `no-active`.
  #resuming:
    | {
        abortSignal: AbortSignal | undefined;
        resolve: (stream: ReadableStream<UIMessageChunk> | null) => void;
        reject: (error: unknown) => void;
      }
    | undefined;
  // Frames are handled one after another (validation is async), so chunks,
  // [DONE], control frames and the socket's close keep their wire order.
  #queue: Promise<void> = Promise.resolve();

  constructor(options: WebSocketChatTransportOptions) {
    this.#options = options;
    const schema = options.chunkSchema ?? uiMessageChunkSchema;
    this.#schema = typeof schema === 'function' ? schema() : schema;
  }

  async sendMessages({
    chatId,
    messages,
    trigger,
    messageId,
    abortSignal,
    body,
  }: Parameters<ChatTransport<UI_MESSAGE>['sendMessages']>[0]): Promise<
    ReadableStream<UIMessageChunk>
  > {
    abortSignal?.throwIfAborted();
    // AbstractChat never overlaps requests; this guards other callers.
    if (this.#sending) throw new Error('WebSocketChatTransport: a request is already being sent');
    this.#sending = true;
    try {
      if (chatId !== this.#chatId) this.#closeSocket(1000, 'switching chat');
      while (this.#response) await this.#response.ended;
      const socket = await this.#connect(chatId);
      abortSignal?.throwIfAborted();

      const frame = {
        ...this.#options.body,
        ...body,
        type: 'message',
        version: '1',
        id: chatId,
        messages: this.#options.sendOnlyLastMessages ? messages.slice(-1) : messages,
        trigger,
        messageId, // dropped by JSON.stringify when undefined, as in DefaultChatTransport
      };
      const { response, stream } = this.#openResponse(socket, abortSignal);
      try {
        socket.send(JSON.stringify(frame));
        // Closed between opening and sending: its close event found no response to fail.
        if (socket.readyState === CLOSED) {
          const error = new Error('WebSocket closed before the request was sent');
          this.#enqueue(() => this.#onClose(socket, error));
        }
      } catch (error) {
        this.#response = undefined;
        response.detachAbort();
        response.end();
        throw error;
      }
      return stream;
    } finally {
      this.#sending = false;
    }
  }

  /**
   * `useChat({ resume: true })`: a socket opened with `resume=true` gets the chat's active
   * response (one whose socket left, on any instance; replayed from its start, then live)
   * or `no-active`, and then serves the chat as usual.
   */
  async reconnectToStream({
    chatId,
    abortSignal,
  }: Parameters<ChatTransport<UI_MESSAGE>['reconnectToStream']>[0]): Promise<
    ReadableStream<UIMessageChunk> | null
  > {
    abortSignal?.throwIfAborted();
    // This transport's own socket holds the chat: nothing else can be answering it.
    if (chatId === this.#chatId && this.#socket?.readyState === OPEN) return null;
    if (this.#sending) throw new Error('WebSocketChatTransport: a request is already being sent');
    this.#sending = true;
    try {
      if (chatId !== this.#chatId) this.#closeSocket(1000, 'switching chat');
      while (this.#response) await this.#response.ended;
      const answer = new Promise<ReadableStream<UIMessageChunk> | null>((resolve, reject) => {
        this.#resuming = { abortSignal, resolve, reject };
      });
      this.#chatId = chatId;
      this.#opening ??= this.#openWithRetries(chatId, true).finally(
        () => (this.#opening = undefined),
      );
      try {
        await this.#opening;
      } catch (error) {
        this.#resuming = undefined;
        throw error;
      }
      return await answer;
    } finally {
      this.#sending = false;
    }
  }

  /** The consumer's stream of one response on `socket`, made the open response. */
  #openResponse(
    socket: WebSocketLike,
    abortSignal: AbortSignal | undefined,
  ): { response: OpenResponse; stream: ReadableStream<UIMessageChunk> } {
    let response!: OpenResponse;
    const stream = new ReadableStream<UIMessageChunk>({
      start: controller => {
        let end!: () => void;
        const ended = new Promise<void>(resolve => (end = resolve));
        const onAbort = () => this.#stop(response, 'user_abort');
        abortSignal?.addEventListener('abort', onAbort, { once: true });
        response = {
          socket,
          controller,
          streamOpen: true,
          frames: 0,
          approvalRequested: false,
          ended,
          end,
          detachAbort: () => abortSignal?.removeEventListener('abort', onAbort),
        };
      },
      // The consumer stopped reading (e.g. the chat failed on an `error` chunk).
      cancel: () => this.#stop(response, 'stream_cancelled'),
    });
    this.#response = response;
    return { response, stream };
  }

  /** Sends microphone audio of the current chat: PCM16 little-endian mono. */
  async sendAudioChunk(pcm16: ArrayBuffer | Uint8Array, sampleRate = 16000): Promise<void> {
    const bytes = pcm16 instanceof Uint8Array ? pcm16 : new Uint8Array(pcm16);
    await this.#sendFrame({ type: 'audio_chunk', chunk: toBase64(bytes), sampleRate });
  }

  /** Marks the start / end of the user's speech. */
  async sendAudioControl(action: 'start' | 'stop'): Promise<void> {
    await this.#sendFrame({ type: 'audio_control', action });
  }

  /** Closes the socket; an open response errors. A later request opens a new socket. */
  close(): void {
    this.#closeSocket(1000, 'client closed');
  }

  // --- connection ------------------------------------------------------------

  async #sendFrame(frame: object): Promise<void> {
    if (this.#chatId === undefined) {
      throw new Error('WebSocketChatTransport: send a message first (the socket belongs to a chat)');
    }
    (await this.#connect(this.#chatId)).send(JSON.stringify(frame));
  }

  /** The open socket of `chatId`, opened (first use, or again after a drop) when needed. */
  async #connect(chatId: string): Promise<WebSocketLike> {
    this.#chatId = chatId;
    if (this.#socket?.readyState === OPEN) return this.#socket;
    this.#opening ??= this.#openWithRetries(chatId).finally(() => (this.#opening = undefined));
    return this.#opening;
  }

  async #openWithRetries(chatId: string, resume = false): Promise<WebSocketLike> {
    const Socket =
      this.#options.WebSocket ??
      (globalThis.WebSocket as unknown as WebSocketConstructor | undefined);
    if (Socket == null) {
      throw new Error(
        'WebSocketChatTransport: no global WebSocket (Node 20): pass the `WebSocket` option, ' +
          'e.g. from the `ws` package',
      );
    }
    const { retries, delayMs } = this.#options.reconnect ?? { retries: 2, delayMs: 500 };
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#open(Socket, chatId, resume);
      } catch (error) {
        if (attempt >= retries) throw error;
        await sleep(delayMs);
      }
    }
  }

  #open(Socket: WebSocketConstructor, chatId: string, resume: boolean): Promise<WebSocketLike> {
    const url = this.#urlFor(chatId, resume);
    return new Promise((resolve, reject) => {
      const socket = new Socket(url, this.#options.protocols);
      let opened = false;
      socket.addEventListener('open', () => {
        opened = true;
        this.#socket = socket;
        this.#startPing(socket);
        resolve(socket);
      });
      socket.addEventListener('message', event => {
        if (typeof event.data !== 'string') return; // the protocol has no binary frames
        const frame: string = event.data;
        this.#enqueue(() => this.#onFrame(socket, frame));
      });
      socket.addEventListener('error', () => {}); // a `close` event always follows
      socket.addEventListener('close', event => {
        if (!opened) {
          reject(new Error(`WebSocket to ${url} could not be opened (code ${event.code ?? '?'})`));
          return;
        }
        if (this.#socket === socket) {
          this.#socket = undefined;
          this.#stopPing();
        }
        const reason = event.reason ? `: ${event.reason}` : '';
        const error = new Error(
          `WebSocket closed before the response ended (code ${event.code}${reason})`,
        );
        this.#enqueue(() => this.#onClose(socket, error));
      });
    });
  }

  #urlFor(chatId: string, resume: boolean): string {
    const url = new URL(this.#options.url, globalThis.location?.href);
    if (url.protocol === 'http:') url.protocol = 'ws:';
    if (url.protocol === 'https:') url.protocol = 'wss:';
    url.searchParams.set('chatId', chatId);
    if (resume) url.searchParams.set('resume', 'true');
    return url.toString();
  }

  #closeSocket(code: number, reason: string): void {
    const socket = this.#socket;
    this.#socket = undefined;
    this.#stopPing();
    socket?.close(code, reason); // its close event errors an open response
  }

  #startPing(socket: WebSocketLike): void {
    const every = this.#options.pingIntervalMs;
    if (!every) return;
    this.#stopPing();
    this.#pingTimer = setInterval(() => {
      if (socket.readyState === OPEN) {
        socket.send(JSON.stringify({ type: 'ping', timestamp: Date.now() }));
      }
    }, every);
  }

  #stopPing(): void {
    clearInterval(this.#pingTimer);
    this.#pingTimer = undefined;
  }

  // --- frames ----------------------------------------------------------------

  #enqueue(task: () => void | Promise<void>): void {
    this.#queue = this.#queue.then(task).catch(() => {});
  }

  async #onFrame(socket: WebSocketLike, frame: string): Promise<void> {
    const data = sseData(frame);
    if (data === undefined) return this.#onControlFrame(frame);

    const resuming = this.#resuming;
    if (resuming != null && this.#response == null) {
      // The first frame of the active response this socket asked to resume.
      this.#resuming = undefined;
      resuming.resolve(this.#openResponse(socket, resuming.abortSignal).stream);
    }
    const response = this.#response;
    // No request open (or it went out on another socket): not part of protocol v1, dropped.
    if (response == null || response.socket !== socket) return;
    response.frames++;
    if (data === '[DONE]') {
      this.#closeStream(response);
      this.#finish(response);
      return;
    }
    if (!response.streamOpen) return; // stopped or closed early: dropped until [DONE]

    const chunk = await this.#parse(data);
    if (!response.streamOpen) return; // stopped while validating
    if (chunk instanceof Error) {
      // As DefaultChatTransport: the stream errors. The rest of the answer is
      // of no use to the client, so the server is asked to stop it.
      this.#failStream(response, chunk);
      this.#trySend(response.socket, { type: 'interrupt', reason: 'invalid_chunk' });
      return;
    }
    response.controller.enqueue(chunk);
    if (chunk.type === 'tool-approval-request') response.approvalRequested = true;
    if (
      chunk.type === 'finish-step' &&
      response.approvalRequested &&
      this.#options.closeStreamAt === 'finish-step-after-approval'
    ) {
      this.#closeStream(response); // the seed client's close (its ADR 0011)
    }
  }

  /** The chunk, or the error DefaultChatTransport would raise for it. */
  async #parse(data: string): Promise<UIMessageChunk | Error> {
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch (cause) {
      return new JSONParseError({ text: data, cause });
    }
    if (this.#options.validate === false || this.#schema.validate == null) {
      return value as UIMessageChunk;
    }
    try {
      const result = await this.#schema.validate(value);
      if (result.success) return result.value as UIMessageChunk;
      return TypeValidationError.wrap({ value, cause: result.error });
    } catch (cause) {
      return TypeValidationError.wrap({ value, cause });
    }
  }

  #onControlFrame(frame: string): void {
    let control: ControlFrame;
    try {
      control = JSON.parse(frame);
    } catch {
      return; // neither SSE nor JSON: not a protocol frame
    }
    if (control == null || typeof control !== 'object') return;
    if (control.type === 'no-active' && this.#resuming != null) {
      this.#resuming.resolve(null); // nothing to resume; the socket now serves the chat
      this.#resuming = undefined;
      return;
    }
    const response = this.#response;
    if (control.type === 'error' && response != null) {
      // Refused before it started (e.g. "a response is still streaming"):
      // nothing more will come for it. Otherwise its frames run to [DONE].
      if (response.frames === 0) this.#finish(response);
      if (response.streamOpen) {
        this.#failStream(response, new Error(String(control.message ?? 'server error')));
        return;
      }
    }
    this.#options.onControl?.(control);
  }

  #onClose(socket: WebSocketLike, error: Error): void {
    if (this.#resuming != null) {
      this.#resuming.reject(error); // e.g. 4409: another socket holds the chat
      this.#resuming = undefined;
    }
    const response = this.#response;
    // Between responses nothing is lost: the next request reconnects.
    if (response == null || response.socket !== socket) return;
    this.#failStream(response, error);
    this.#finish(response);
  }

  /** Abort or cancel: tell the server, close the stream now, drop the rest until [DONE]. */
  #stop(response: OpenResponse, reason: string): void {
    if (!response?.streamOpen) return;
    this.#trySend(response.socket, { type: 'interrupt', reason });
    this.#closeStream(response);
  }

  #trySend(socket: WebSocketLike, frame: object): void {
    if (socket.readyState === OPEN) socket.send(JSON.stringify(frame));
  }

  #closeStream(response: OpenResponse): void {
    if (!response.streamOpen) return;
    response.streamOpen = false;
    response.detachAbort();
    try {
      response.controller.close();
    } catch {
      // already cancelled by the consumer
    }
  }

  #failStream(response: OpenResponse, error: Error): void {
    if (!response.streamOpen) return;
    response.streamOpen = false;
    response.detachAbort();
    try {
      response.controller.error(error);
    } catch {
      // already cancelled by the consumer
    }
  }

  #finish(response: OpenResponse): void {
    if (this.#response === response) this.#response = undefined;
    response.end();
  }
}
