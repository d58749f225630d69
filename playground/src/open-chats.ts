// The chats the page holds: the one shown, and those it showed before. A chat left while it
// answers keeps its own `Chat` and transport and goes on behind the one shown (nothing of it
// reaches the other chat); opened again while it still answers, it is shown as it is. An idle
// chat opened again is read afresh from the server, which may know more (another tab).
//
// On our transport an approval or a browser call waits only while its socket is open
// (docs/live-protocol.md): a chat that waits for the user there keeps its socket and its
// `Chat` too, so that it can still be answered when it is opened again.
import { isToolUIPart } from 'ai';
import type { BgmPlayer } from './audio';
import { createPlaygroundChat, type PlaygroundChat, type Restored } from './chat';
import type { TransportKind } from './config';

type Held = { session: PlaygroundChat; unsubscribe: () => void };

export function isBusy(status: string): boolean {
  return status === 'submitted' || status === 'streaming';
}

/** Answering, or (our transport) waiting for the user on its open socket. */
function mustStay(session: PlaygroundChat): boolean {
  if (isBusy(session.chat.status)) return true;
  const last = session.chat.messages.at(-1);
  return (
    session.voice !== undefined &&
    last?.role === 'assistant' &&
    last.parts.some(
      part =>
        isToolUIPart(part) &&
        (part.state === 'approval-requested' ||
          part.state === 'approval-responded' ||
          part.state === 'input-available'),
    )
  );
}

function keyOf(kind: TransportKind, chatId: string): string {
  return `${kind}:${chatId}`;
}

export class OpenChats {
  readonly #bgm: BgmPlayer;
  readonly #held = new Map<string, Held>();
  readonly #listeners = new Set<() => void>();

  constructor(bgm: BgmPlayer) {
    this.#bgm = bgm;
  }

  /** The chat as the page holds it while it still answers (or, on ours, waits); otherwise
   * undefined (and the idle copy is let go): read it from the server. */
  reopen(kind: TransportKind, chatId: string): PlaygroundChat | undefined {
    const key = keyOf(kind, chatId);
    const held = this.#held.get(key);
    if (!held) return undefined;
    if (mustStay(held.session)) {
      held.session.shown = true;
      return held.session;
    }
    this.#release(key, held);
    return undefined;
  }

  /** A chat to show: new, or restored from what the server keeps. */
  open(kind: TransportKind, chatId: string, restored?: Restored): PlaygroundChat {
    const key = keyOf(kind, chatId);
    const earlier = this.#held.get(key);
    if (earlier) this.#release(key, earlier);
    const session = createPlaygroundChat(kind, chatId, this.#bgm, restored);
    const unsubscribe = session.chat['~registerStatusCallback'](() => this.#changed(session));
    this.#held.set(key, { session, unsubscribe });
    return session;
  }

  /** The page shows another chat: this one's audio stops, and its socket (ours, one per chat)
   * closes once it is idle; an answer it is writing goes on. */
  leave(session: PlaygroundChat): void {
    session.shown = false;
    session.pcm.close();
    if (!mustStay(session)) session.dispose();
  }

  /** Whether the page's own copy of the chat is answering (on any transport); undefined when
   * the page holds none. The page knows first: the server's `active` ends just after the
   * answer's `[DONE]`, so a list read as the answer ends may still say it runs. */
  busy(chatId: string): boolean | undefined {
    let held: boolean | undefined;
    for (const { session } of this.#held.values()) {
      if (session.chat.id === chatId) held = held || isBusy(session.chat.status);
    }
    return held;
  }

  /** Before a DELETE: stops the page's copy of the chat and lets it go. The server would end
   * the answer and close a `/live?chatId=` socket itself (4410), but the page's copy would be
   * left showing a chat that is gone. */
  async close(chatId: string): Promise<void> {
    for (const [key, held] of [...this.#held]) {
      if (held.session.chat.id !== chatId) continue;
      if (isBusy(held.session.chat.status)) await held.session.chat.stop();
      this.#release(key, held);
    }
  }

  /** Called on every status change of any chat held (the list shows who answers). */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #changed(session: PlaygroundChat): void {
    if (!session.shown && !mustStay(session)) session.dispose();
    for (const listener of this.#listeners) listener();
  }

  #release(key: string, held: Held): void {
    held.unsubscribe();
    held.session.dispose();
    this.#held.delete(key);
  }
}
