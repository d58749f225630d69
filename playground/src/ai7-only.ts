// What only ai 7 has. The ai 6 build of the page (`vite build --mode v6`) replaces this
// module with ./ai7-only.ai6.ts.

/** ai 7's stock WebSocketChatTransport: one socket for every chat, `ws://host/live`. */
export { WebSocketChatTransport as StockWebSocketChatTransport } from 'ai';
