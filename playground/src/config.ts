// Where the API lives. By default the page's own origin (the FastAPI server serves
// this page at `/`, or `vite preview` proxies to it). `?api=http://127.0.0.1:8000`
// points the page at another server (that server needs ADK_STREAM_CORS_ORIGINS for
// POST /stream). `?transport=live` opens the page on /live.

export type TransportKind = 'stream' | 'live';

const params = new URLSearchParams(window.location.search);
const apiBase = (params.get('api') ?? '').replace(/\/+$/, '');

export const initialTransport: TransportKind =
  params.get('transport') === 'live' ? 'live' : 'stream';

export function streamUrl(): string {
  return `${apiBase}/stream`;
}

export function liveUrl(): string {
  const url = new URL(`${apiBase}/live`, window.location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.toString();
}
