// Where the API lives, and how the page talks to it. By default the API is where the page is:
// the server serves it at `/` (`vite preview` proxies to it), or, for a folder of agents, each
// agent's page at `/apps/<name>/` beside that agent's `/apps/<name>/stream` and `/live`.
// `?api=http://127.0.0.1:8000` points the page at another server (that server needs
// ADK_STREAM_CORS_ORIGINS for POST /stream). `?transport=live` or `?transport=voice` opens the
// page on that transport; `?chat=<id>` on that chat (the page keeps both in its URL).
import { StockWebSocketChatTransport } from './ai7-only';

/**
 * - `stream`: POST /stream with ai's DefaultChatTransport;
 * - `live`: WS /live with ai 7's own WebSocketChatTransport (on ai 6, which has none, ours);
 * - `voice`: WS /live?chatId= with our transport (adk-stream-protocol-client): the
 *   microphone, spoken answers and interrupts, on the live model. ai 7 only: on ai 6 that is
 *   what `live` is.
 */
export type TransportKind = 'stream' | 'live' | 'voice';

/** The `ai` package this build of the page bundles (vite.config.js). */
export const AI_VERSION = __AI_VERSION__;

export const TRANSPORTS: readonly TransportKind[] = StockWebSocketChatTransport
  ? ['stream', 'live', 'voice']
  : ['stream', 'live'];

/** Whether a transport is ours (adk-stream-protocol-client, `?chatId=`, voice). */
export function usesOurTransport(kind: TransportKind): boolean {
  return kind === 'voice' || (kind === 'live' && !StockWebSocketChatTransport);
}

const params = new URLSearchParams(window.location.search);

/** How the page runs a browser tool it approved; it must match the server's
 * ADK_STREAM_BROWSER_APPROVAL_FLOW (README, ADR 0011). `?flow=add-output`: as the user
 * approves it, then `addToolOutput`; by default from `onToolCall`, once the server hands the
 * approved call back. */
export const BROWSER_APPROVAL_FLOW: 'on-tool-call' | 'add-output' =
  params.get('flow') === 'add-output' ? 'add-output' : 'on-tool-call';
const pageFolder = window.location.pathname.replace(/\/[^/]*$/, '');
const apiBase = (params.get('api') ?? pageFolder).replace(/\/+$/, '');

/** The server's alphabet for chat ids: anything else names no chat. */
const CHAT_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

/** What the URL names: the transport (`?transport=`; on ai 6 `voice` is `live`) and the chat
 * (`?chat=`). Read at start and after Back / Forward. */
export function openedInUrl(): { kind: TransportKind; chatId: string | undefined } {
  const now = new URLSearchParams(window.location.search);
  const asked = now.get('transport');
  const kind =
    TRANSPORTS.find(option => option === asked) ?? (asked === 'voice' ? 'live' : 'stream');
  const chatId = now.get('chat') ?? '';
  return { kind, chatId: CHAT_ID.test(chatId) ? chatId : undefined };
}

/** The page's URL for a chat on a transport: `?transport=` (unless `stream`) and `?chat=`,
 * the other parameters (`api`) kept. */
export function pageUrl(kind: TransportKind, chatId: string): string {
  const url = new URL(window.location.href);
  if (kind === 'stream') url.searchParams.delete('transport');
  else url.searchParams.set('transport', kind);
  url.searchParams.set('chat', chatId);
  return url.toString();
}

export function chatsUrl(): string {
  return `${apiBase}/chats`;
}

export function streamUrl(): string {
  return `${apiBase}/stream`;
}

export function liveUrl(): string {
  const url = new URL(`${apiBase}/live`, window.location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.toString();
}
