// The server's record of the user's chats (`/chats`, README "Chats"): the list, one chat with
// the messages useChat held when its last response ended, rename and delete.
import { chatsUrl } from './config';
import type { PlaygroundMessage } from './types';

/** A chat as `GET /chats` lists it. */
export type ChatListing = {
  id: string;
  /** The first user text, shortened, until the user renames it. */
  title: string;
  createdAt: string;
  updatedAt: string;
  /** A response is being written now. */
  active: boolean;
  /** What its last answer waits for. */
  waiting: 'approval' | 'browser' | null;
};

export type ChatPage = { chats: ChatListing[]; nextCursor: string | null };

/** `GET /chats/{chatId}`: the chat with its messages. */
export type ChatRecord = ChatListing & { messages: PlaygroundMessage[] };

/** A refusal of the server, with its `detail`. */
export class ChatApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function chatUrl(chatId: string): string {
  return `${chatsUrl()}/${encodeURIComponent(chatId)}`;
}

async function refusal(response: Response): Promise<ChatApiError> {
  let detail = `${response.status} ${response.statusText}`;
  try {
    const body: unknown = await response.json();
    const said = (body as { detail?: unknown } | null)?.detail;
    if (typeof said === 'string') detail = said;
  } catch {
    // not JSON: the status says enough
  }
  return new ChatApiError(response.status, detail);
}

async function json<T>(response: Response): Promise<T> {
  if (!response.ok) throw await refusal(response);
  return (await response.json()) as T;
}

export async function listChats(limit: number, cursor?: string): Promise<ChatPage> {
  const query = new URLSearchParams({ limit: String(limit) });
  if (cursor) query.set('cursor', cursor);
  return json<ChatPage>(await fetch(`${chatsUrl()}?${query}`));
}

/** The chat, or undefined when the server has none by that id (a new chat, a deleted one). */
export async function loadChat(
  chatId: string,
  signal?: AbortSignal,
): Promise<ChatRecord | undefined> {
  const response = await fetch(chatUrl(chatId), { signal });
  if (response.status === 404) return undefined;
  return json<ChatRecord>(response);
}

export async function renameChat(chatId: string, title: string): Promise<ChatListing> {
  return json<ChatListing>(
    await fetch(chatUrl(chatId), {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ title }),
    }),
  );
}

/** Removes the chat; gone already (404) counts as done. */
export async function deleteChat(chatId: string): Promise<void> {
  const response = await fetch(chatUrl(chatId), { method: 'DELETE' });
  if (!response.ok && response.status !== 404) throw await refusal(response);
}
