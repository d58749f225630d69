import { generateId } from 'ai';
import { useEffect, useMemo, useState } from 'react';
import { BgmPlayer } from './audio';
import { createPlaygroundChat } from './chat';
import { ChatView } from './ChatView';
import { initialTransport, type TransportKind } from './config';
import { useStore } from './store';

const bgm = new BgmPlayer();

export function App() {
  const [kind, setKind] = useState<TransportKind>(initialTransport);
  const [chatId, setChatId] = useState(() => generateId());
  // One Chat (and, on /live, one WebSocket) per chat id; switching starts a new chat.
  const session = useMemo(() => createPlaygroundChat(kind, chatId, bgm), [kind, chatId]);
  useEffect(() => () => session.dispose(), [session]);

  function choose(next: TransportKind) {
    if (next === kind) return;
    setKind(next);
    setChatId(generateId());
  }

  return (
    <div className="app">
      <header>
        <h1>adk-stream-protocol playground</h1>
        <div className="switch" role="group" aria-label="Transport" data-testid="transport-switch">
          {(['stream', 'live'] as const).map(option => (
            <button
              key={option}
              type="button"
              data-testid={`transport-${option}`}
              aria-pressed={kind === option}
              className={kind === option ? 'active' : ''}
              onClick={() => choose(option)}
            >
              {option === 'stream' ? 'POST /stream (SSE)' : 'WS /live'}
            </button>
          ))}
        </div>
        <div className="endpoint">
          transport: <b data-testid="active-transport">/{kind}</b>{' '}
          <code data-testid="endpoint">
            {kind === 'stream' ? 'POST' : 'WS'} {session.endpoint}
          </code>
          <button type="button" data-testid="new-chat-button" onClick={() => setChatId(generateId())}>
            New chat
          </button>
        </div>
        <BgmStatus />
      </header>
      <ChatView key={chatId} session={session} />
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
