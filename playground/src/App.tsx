import { generateId } from 'ai';
import { useEffect, useState } from 'react';
import { BgmPlayer } from './audio';
import type { PlaygroundChat } from './chat';
import { deleteChat, loadChat } from './chat-api';
import { ChatList } from './ChatList';
import { ChatView } from './ChatView';
import { AI_VERSION, openedInUrl, pageUrl, TRANSPORTS, type TransportKind } from './config';
import { OpenChats } from './open-chats';
import { StatePanel } from './StatePanel';
import { useStore } from './store';

const bgm = new BgmPlayer();
const chats = new OpenChats(bgm);

const LABELS: Record<TransportKind, string> = {
  stream: 'POST /stream (SSE)',
  live: 'WS /live',
  voice: 'WS /live · voice',
};

/** The chat shown, on a transport. `fresh`: made on this page, so the server has none yet. */
type Opened = { kind: TransportKind; chatId: string; fresh: boolean };

function fromUrl(): Opened {
  const { kind, chatId } = openedInUrl();
  return chatId ? { kind, chatId, fresh: false } : { kind, chatId: generateId(), fresh: true };
}

type Shown = { session?: PlaygroundChat; problem?: string };

export function App() {
  const [opened, setOpened] = useState<Opened>(fromUrl);
  const [shown, setShown] = useState<Shown>({});
  const [attempt, setAttempt] = useState(0);

  // The URL names the open chat: a reload opens it again, Back / Forward move between chats.
  useEffect(() => {
    const url = pageUrl(opened.kind, opened.chatId);
    if (url !== window.location.href) window.history.replaceState(null, '', url);
  }, [opened]);
  useEffect(() => {
    const onPopState = () => setOpened(fromUrl());
    window.addEventListener('popstate', onPopState);
    return () => window.removeEventListener('popstate', onPopState);
  }, []);

  // One Chat per chat (and with our transport one WebSocket). A chat still answering when
  // the page leaves it goes on behind the next one; otherwise it is read from the server.
  useEffect(() => {
    const { kind, chatId, fresh } = opened;
    let session = chats.reopen(kind, chatId);
    if (session || fresh) {
      session ??= chats.open(kind, chatId);
      setShown({ session });
      const held = session;
      return () => chats.leave(held);
    }
    setShown({});
    const abort = new AbortController();
    loadChat(chatId, abort.signal).then(
      record => {
        if (abort.signal.aborted) return;
        const restored = record && { messages: record.messages, active: record.active };
        session = chats.open(kind, chatId, restored);
        session.runWaitingBrowserCalls();
        setShown({ session });
      },
      (error: unknown) => {
        if (abort.signal.aborted) return;
        setShown({ problem: error instanceof Error ? error.message : String(error) });
      },
    );
    return () => {
      abort.abort();
      if (session) chats.leave(session);
    };
  }, [opened, attempt]);

  function go(next: Opened) {
    window.history.pushState(null, '', pageUrl(next.kind, next.chatId));
    setOpened(next);
  }

  const newChat = (kind: TransportKind = opened.kind) =>
    go({ kind, chatId: generateId(), fresh: true });

  function open(chatId: string) {
    if (chatId !== opened.chatId) go({ kind: opened.kind, chatId, fresh: false });
  }

  async function remove(chatId: string) {
    if (chatId === opened.chatId) newChat();
    await chats.close(chatId); // its answer stopped, its socket closed: the server then lets it go
    await deleteChat(chatId);
  }

  const session = shown.session;
  return (
    <div className="app">
      <header>
        <h1>
          adk-stream-protocol playground{' '}
          <small data-testid="ai-version">ai {AI_VERSION}</small>
        </h1>
        <div className="switch" role="group" aria-label="Transport" data-testid="transport-switch">
          {TRANSPORTS.map(option => (
            <button
              key={option}
              type="button"
              data-testid={`transport-${option}`}
              aria-pressed={opened.kind === option}
              className={opened.kind === option ? 'active' : ''}
              onClick={() => option !== opened.kind && newChat(option)}
            >
              {LABELS[option]}
            </button>
          ))}
        </div>
        <div className="endpoint">
          transport: <b data-testid="active-transport">{opened.kind}</b>{' '}
          <span data-testid="transport-name">{session?.transportName}</span>{' '}
          <code data-testid="endpoint">{session?.endpoint}</code>
        </div>
        <BgmStatus />
      </header>
      <div className="layout">
        <ChatList
          chats={chats}
          openId={opened.chatId}
          onOpen={open}
          onNew={() => newChat()}
          onDelete={remove}
        />
        <section className="conversation" aria-label="Conversation">
          {session ? (
            <ChatView key={`${session.kind}:${session.chat.id}`} session={session} />
          ) : shown.problem ? (
            <div className="error" role="alert" data-testid="chat-load-error">
              The chat could not be loaded: {shown.problem}{' '}
              <button
                type="button"
                data-testid="chat-load-retry"
                onClick={() => setAttempt(n => n + 1)}
              >
                Retry
              </button>
            </div>
          ) : (
            <p className="hint" data-testid="chat-loading">
              Loading the chat…
            </p>
          )}
        </section>
        {/* The third column of .layout's grid: the open chat's shared state. */}
        <aside className="side-panel state-panel" aria-label="Shared state" data-testid="state-panel">
          {session && <StatePanel key={`${session.kind}:${session.chat.id}`} session={session} />}
        </aside>
      </div>
    </div>
  );
}

function BgmStatus() {
  const state = useStore(bgm.state);
  return (
    <div className="bgm" data-testid="bgm-status" data-track={state.track ?? ''} data-audio={state.audio}>
      {state.track == null ? (
        'music: off'
      ) : (
        <>
          music: track {state.track} ({state.hz} Hz){' '}
          <button type="button" data-testid="bgm-stop" onClick={() => bgm.stop()}>
            Stop music
          </button>
        </>
      )}
    </div>
  );
}
