import { generateId } from 'ai';
import { useEffect, useMemo, useState } from 'react';
import { BgmPlayer } from './audio';
import { createPlaygroundChat } from './chat';
import { ChatView } from './ChatView';
import { AI_VERSION, initialTransport, TRANSPORTS, type TransportKind } from './config';
import { useStore } from './store';

const bgm = new BgmPlayer();

const LABELS: Record<TransportKind, string> = {
  stream: 'POST /stream (SSE)',
  live: 'WS /live',
  voice: 'WS /live · voice',
};

export function App() {
  const [kind, setKind] = useState<TransportKind>(initialTransport);
  const [chatId, setChatId] = useState(() => generateId());
  // One Chat per chat id (and with our transport one WebSocket); switching starts a new chat.
  // ai 7's WebSocketChatTransport is one for the page: every chat on `live` shares its socket.
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
              aria-pressed={kind === option}
              className={kind === option ? 'active' : ''}
              onClick={() => choose(option)}
            >
              {LABELS[option]}
            </button>
          ))}
        </div>
        <div className="endpoint">
          transport: <b data-testid="active-transport">{kind}</b>{' '}
          <span data-testid="transport-name">{session.transportName}</span>{' '}
          <code data-testid="endpoint">{session.endpoint}</code>
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
