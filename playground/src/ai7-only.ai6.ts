// ./ai7-only.ts in the ai 6 build of the page: ai 6 has no WebSocketChatTransport of its
// own, so text on /live goes through ours (adk-stream-protocol-client).
import type { ChatTransport, UIMessage } from 'ai';

type StockTransport = new <M extends UIMessage>(options: {
  url: string;
}) => ChatTransport<M> & { close(): void };

export const StockWebSocketChatTransport = undefined as StockTransport | undefined;
