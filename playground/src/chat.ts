// One chat: the AI SDK `Chat`, its transport and the browser side of its tools.
import { Chat } from '@ai-sdk/react';
import {
  DefaultChatTransport,
  getToolName,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
  type ChatTransport,
} from 'ai';
import { WebSocketChatTransport } from 'adk-stream-protocol-client';
import { StockWebSocketChatTransport } from './ai7-only';
import { BgmPlayer, PcmPlayer } from './audio';
import {
  BROWSER_APPROVAL_FLOW,
  liveUrl,
  streamUrl,
  usesOurTransport,
  type TransportKind,
} from './config';
import { Store } from './store';
import type { PlaygroundMessage, SharedState } from './types';

/** Tools the server hands to the browser (ADK long-running tools of the demo agent). */
export const BROWSER_TOOLS: Record<string, { needsApproval: boolean }> = {
  change_bgm: { needsApproval: false },
  get_location: { needsApproval: true },
};

export type LocationOutput = { latitude: number; longitude: number; accuracy: number };

export function currentLocation(): Promise<LocationOutput> {
  return new Promise((resolve, reject) => {
    if (!('geolocation' in navigator)) {
      reject(new Error('Geolocation is not available in this browser'));
      return;
    }
    navigator.geolocation.getCurrentPosition(
      position =>
        resolve({
          latitude: position.coords.latitude,
          longitude: position.coords.longitude,
          accuracy: position.coords.accuracy,
        }),
      error => reject(new Error(error.message || `Geolocation error (code ${error.code})`)),
      { enableHighAccuracy: true, timeout: 5000, maximumAge: 0 },
    );
  });
}

export interface PlaygroundChat {
  kind: TransportKind;
  /** What the page talks to, as shown: `POST /stream`, `WS ws://host/live`... */
  endpoint: string;
  /** The transport's class and its package. */
  transportName: string;
  chat: Chat<PlaygroundMessage>;
  /** Only with our transport: it, for the microphone's audio frames. */
  voice: WebSocketChatTransport<PlaygroundMessage> | undefined;
  /** Resolves once the next request has gone out (our `message` frame is sent). */
  nextRequestSent(): Promise<void>;
  /** Stops the answer on the server too (see README: stop() alone only stops reading). */
  stop(): Promise<void>;
  pcm: PcmPlayer;
  /** Whether the view should resume an answer as it opens (useChat `resume`): always on
   * `/stream` and ai 7's socket (nothing comes when none runs); with ours only for a chat the
   * server says is answering, since its resume opens the chat's live session. */
  resume: boolean;
  /** False while the chat runs on behind another one: its voice audio is not played. */
  shown: boolean;
  /** Shared-state changes the user made in the panel, sent with the next message (the
   * request's `state` field, ADR 0044); `null` removes a key. */
  pendingState: Store<SharedState>;
  /** Set by the view: a tool's transient notice arrived (`onData`). */
  onNotice?: (text: string) => void;
  /** Runs the browser tools a restored chat's last answer waits for (`input-available`). */
  runWaitingBrowserCalls(): void;
  /** The user's answer to an approval; with `?flow=add-output` an approved browser tool then
   * runs at once. */
  approve(answer: { id: string; approved: boolean }): Promise<void>;
  dispose(): void;
}

/** What the server holds of a chat the page opens (`GET /chats/{chatId}`). */
export type Restored = { messages: PlaygroundMessage[]; active: boolean };

let stockTransport: (ChatTransport<PlaygroundMessage> & { close(): void }) | undefined;

/** ai 7's WebSocketChatTransport: one for the page, shared by every chat on /live. It opens
 * its socket (`ws://host/live`, no chat id) on the first request and keeps it. */
function sharedStockTransport(): ChatTransport<PlaygroundMessage> {
  const Stock = StockWebSocketChatTransport;
  if (!Stock) throw new Error('this ai has no WebSocketChatTransport');
  if (!stockTransport) {
    stockTransport = new Stock<PlaygroundMessage>({ url: liveUrl() });
    window.addEventListener('pagehide', () => stockTransport?.close());
  }
  return stockTransport;
}

function chooseTransport(
  kind: TransportKind,
  id: string,
): Pick<PlaygroundChat, 'endpoint' | 'transportName' | 'voice'> & {
  inner: ChatTransport<PlaygroundMessage>;
} {
  if (kind === 'stream') {
    const api = streamUrl();
    return {
      inner: new DefaultChatTransport<PlaygroundMessage>({ api }),
      voice: undefined,
      endpoint: `POST ${api}`,
      transportName: 'DefaultChatTransport (ai)',
    };
  }
  const url = liveUrl();
  if (usesOurTransport(kind)) {
    const voice = new WebSocketChatTransport<PlaygroundMessage>({ url });
    return {
      inner: voice,
      voice,
      endpoint: `WS ${url}?chatId=${id}`,
      transportName: 'WebSocketChatTransport (adk-stream-protocol-client)',
    };
  }
  return {
    inner: sharedStockTransport(),
    voice: undefined,
    endpoint: `WS ${url}`,
    transportName: 'WebSocketChatTransport (ai)',
  };
}

export function createPlaygroundChat(
  kind: TransportKind,
  id: string,
  bgm: BgmPlayer,
  restored?: Restored,
): PlaygroundChat {
  const { inner, voice, endpoint, transportName } = chooseTransport(kind, id);

  // The microphone must not send audio before the request it belongs to.
  let waiters: { resolve: () => void; reject: (error: unknown) => void }[] = [];
  const transport: ChatTransport<PlaygroundMessage> = {
    async sendMessages(options) {
      try {
        const stream = await inner.sendMessages(options);
        waiters.forEach(w => w.resolve());
        return stream;
      } catch (error) {
        waiters.forEach(w => w.reject(error));
        throw error;
      } finally {
        waiters = [];
      }
    },
    reconnectToStream: options => inner.reconnectToStream(options),
  };

  const pcm = new PcmPlayer();
  const ran = new Set<string>(); // browser tool calls already run
  const running = new Set<string>(); // browser tool calls running now (add-output)

  // On `/stream` and ai 7's socket, an answer still being written that continues the last
  // message (after an approval or a browser tool's output) is resumed from its start, and its
  // replay rebuilds that message first (docs/adr/0045): the chat opens without it, as a
  // client that kept it would add the rebuilt parts to its own.
  const continues =
    !voice && restored?.active === true && restored.messages.at(-1)?.role === 'assistant';
  const chat: Chat<PlaygroundMessage> = new Chat<PlaygroundMessage>({
    id,
    // A restored chat goes on from the messages the server kept, as if never reloaded.
    messages: continues ? restored.messages.slice(0, -1) : restored?.messages,
    transport,
    // Approvals and browser tool outputs go back by themselves; never while the page still
    // runs an approved browser tool (add-output: its approval has gone, its output follows).
    sendAutomaticallyWhen: options =>
      !options.messages
        .at(-1)
        ?.parts.some(p => isToolUIPart(p) && running.has(p.toolCallId)) &&
      (lastAssistantMessageIsCompleteWithApprovalResponses(options) ||
        lastAssistantMessageIsCompleteWithToolCalls(options)),
    onToolCall: ({ toolCall }) => {
      const spec = BROWSER_TOOLS[toolCall.toolName];
      if (!spec) return;
      if (spec.needsApproval) {
        // First `tool-input-available`: the approval request follows, wait for it.
        // After the approval the server sends `tool-input-available` again, with
        // the part approved (docs/adr/0011): run the tool then.
        const part = chat.messages
          .at(-1)
          ?.parts.find(p => isToolUIPart(p) && p.toolCallId === toolCall.toolCallId);
        if (!part || !isToolUIPart(part) || part.approval?.approved !== true) return;
      }
      run(toolCall);
    },
    onData: part => {
      if (part.type === 'data-pcm' && session.shown) pcm.enqueue(part.data);
      if (part.type === 'data-notice') session.onNotice?.(part.data.text);
    },
  });

  function run(toolCall: { toolName: string; toolCallId: string; input: unknown }) {
    if (ran.has(toolCall.toolCallId)) return;
    ran.add(toolCall.toolCallId);
    running.add(toolCall.toolCallId);
    const done = () => running.delete(toolCall.toolCallId);
    // Never await addToolOutput here: the chat is still processing this response.
    void runBrowserTool(toolCall.toolName, toolCall.input, bgm).finally(done).then(
      output =>
        chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output }),
      (error: unknown) =>
        chat.addToolOutput({
          state: 'output-error',
          tool: toolCall.toolName,
          toolCallId: toolCall.toolCallId,
          errorText: error instanceof Error ? error.message : String(error),
        }),
    );
  }

  const session: PlaygroundChat = {
    kind,
    endpoint,
    transportName,
    chat,
    voice,
    nextRequestSent: () =>
      new Promise<void>((resolve, reject) => waiters.push({ resolve, reject })),
    pcm,
    pendingState: new Store<SharedState>({}),
    resume: !voice || restored?.active === true,
    shown: true,
    runWaitingBrowserCalls() {
      // The server keeps a call the browser has not answered as `input-available` (approved
      // first when its tool needs approval). While an answer runs, resume hands it over.
      const last = chat.messages.at(-1);
      if (restored?.active || last?.role !== 'assistant') return;
      for (const part of last.parts) {
        if (!isToolUIPart(part) || part.state !== 'input-available') continue;
        const spec = BROWSER_TOOLS[getToolName(part)];
        // The approval an approved call keeps (ai's types have none in this state).
        const approved = (part as { approval?: { approved?: boolean } }).approval?.approved;
        if (!spec || (spec.needsApproval && approved !== true)) continue;
        run({ toolName: getToolName(part), toolCallId: part.toolCallId, input: part.input });
      }
    },
    async approve({ id, approved }) {
      await chat.addToolApprovalResponse({ id, approved });
      if (!approved || BROWSER_APPROVAL_FLOW !== 'add-output') return;
      // The server will not hand the call back: the page runs it now (README, ADR 0011).
      const part = chat.messages
        .flatMap(message => message.parts)
        .find(p => isToolUIPart(p) && p.approval?.id === id);
      if (part && isToolUIPart(part) && BROWSER_TOOLS[getToolName(part)]) {
        run({ toolName: getToolName(part), toolCallId: part.toolCallId, input: part.input });
      }
    },
    async stop() {
      if (kind === 'stream') {
        // Responses may be resumable: a closed connection no longer stops the run, so the
        // server is told. On /live the transport says it: ai 7's sends `abort`, ours
        // `interrupt`.
        void fetch(`${streamUrl()}/${encodeURIComponent(id)}/stream`, { method: 'DELETE' }).catch(
          () => undefined,
        );
      }
      await chat.stop();
    },
    dispose() {
      voice?.close(); // the shared ai 7 transport stays open for the next chat
      pcm.close();
    },
  };
  return session;
}

async function runBrowserTool(name: string, input: unknown, bgm: BgmPlayer): Promise<unknown> {
  switch (name) {
    case 'change_bgm': {
      const track = Number((input as { track?: unknown } | undefined)?.track ?? 1);
      bgm.play(track);
      return { success: true, track };
    }
    case 'get_location':
      return currentLocation();
    default:
      throw new Error(`unknown browser tool ${name}`);
  }
}
