import { useChat } from '@ai-sdk/react';
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { MicCapture } from './audio';
import type { PlaygroundChat } from './chat';
import type { ToolAnswer } from './InterruptForms';
import { MessageView, type Answering } from './MessageView';
import { reasonOf, withAnswersTakenBack } from './refusals';
import { useStore } from './store';
import type { ApprovalAnswer } from './types';

export function ChatView({ session }: { session: PlaygroundChat }) {
  const { messages, setMessages, status, error, sendMessage, regenerate, clearError } = useChat({
    chat: session.chat,
    // A chat opened (a reload, a chat from the list) picks up an answer still being written
    // (nothing when there is none): a GET on /stream, a `resume` frame on ai 7's socket. With
    // ours only when the server says one runs: its resume opens the chat's live session.
    resume: session.resume,
  });
  const [text, setText] = useState('');
  const [files, setFiles] = useState<FileList | undefined>();
  const fileInput = useRef<HTMLInputElement>(null);
  const bottom = useRef<HTMLDivElement>(null);
  const errorBox = useRef<HTMLDivElement>(null);
  const busy = status === 'submitted' || status === 'streaming';
  const [notice, setNotice] = useState<string | undefined>();
  // Questions and sign-ins the user answered whose answers the server has not taken yet, and
  // the server's reason for each answer it refused.
  const answered = useRef(new Set<string>());
  const [refusals, setRefusals] = useState<Record<string, string>>({});

  useEffect(() => {
    if (status === 'ready') answered.current.clear(); // taken: the agent went on
    if (status !== 'error' || !error || answered.current.size === 0) return;
    // Refused (422, or an `error` on a socket): nothing resumed, so the form comes back with
    // the reason beside it, and the user answers again.
    const calls = new Set(answered.current);
    answered.current.clear();
    const reason = reasonOf(error);
    setMessages(held => withAnswersTakenBack(held, calls));
    setRefusals(held => ({ ...held, ...Object.fromEntries([...calls].map(id => [id, reason])) }));
    clearError();
  }, [status, error, setMessages, clearError]);

  useEffect(() => {
    session.onNotice = setNotice; // transient data parts: in no message, only here
    return () => {
      session.onNotice = undefined;
    };
  }, [session]);

  useEffect(() => {
    bottom.current?.scrollIntoView?.({ block: 'end' });
  }, [messages]);

  // The error box comes after the last message update, so the scroll above has already run:
  // without this, in a long chat the error would stay below the fold.
  useEffect(() => {
    if (error) errorBox.current?.scrollIntoView?.({ block: 'nearest' });
  }, [error]);

  function submit(event: FormEvent) {
    event.preventDefault();
    if (busy || (!text.trim() && !files?.length)) return;
    session.pcm.unlock(); // a click: the page may play the answer's audio later
    // Changes made in the shared-state panel go with this message (ADR 0044's `state`).
    const state = session.pendingState.get();
    const changed = Object.keys(state).length > 0;
    const message = files?.length ? { text, files } : { text };
    void sendMessage(message, changed ? { body: { state } } : undefined);
    if (changed) session.pendingState.set({});
    setText('');
    setFiles(undefined);
    if (fileInput.current) fileInput.current.value = '';
  }

  /**
   * An approval, with the payload the user edited in a `data-approval-response` part of the
   * message it answers (ADR 0041): `addToolApprovalResponse` carries only id and decision.
   */
  function respond({ id, approved, payload }: ApprovalAnswer) {
    if (payload !== undefined) {
      const answer = { type: 'data-approval-response' as const, id, data: { payload } };
      setMessages(held =>
        held.map(message =>
          message.parts.some(p => 'approval' in p && p.approval?.id === id)
            ? { ...message, parts: [...message.parts, answer] }
            : message,
        ),
      );
    }
    void session.approve({ id, approved });
  }

  /** A question's or a sign-in's answer: `addToolOutput`; the stock helper sends it. */
  function answer(toolAnswer: ToolAnswer) {
    answered.current.add(toolAnswer.toolCallId);
    setRefusals(({ [toolAnswer.toolCallId]: _earlier, ...others }) => others);
    void session.chat.addToolOutput(toolAnswer);
  }

  const answering: Answering = { onRespond: respond, onAnswer: answer, refusals };

  function stopAnswer() {
    session.pcm.flush();
    void session.stop();
  }

  return (
    <>
      <main className="messages" data-testid="messages">
        {messages.length === 0 && (
          <p className="hint" data-testid="empty-hint">
            Try: “What's the weather in Tokyo?” · “Send 50 dollars to Hanako” · “Pay Alice 10
            and Bob 20” · “Pay Alice 10, then pay Bob 20” · “Where am I?” · “Play music, track
            2” · “Draw a chart” · “Tell me about Tokyo, with sources” · “Think step by step
            about lunch” · “fail”
          </p>
        )}
        {messages.map(message => (
          <MessageView key={message.id} message={message} answering={answering} />
        ))}
        {notice && (
          <p className="notice" data-testid="notice" role="status">
            {notice}
          </p>
        )}
        {error && (
          <div ref={errorBox} className="error" role="alert" data-testid="error-box">
            <span data-testid="error-message">{error.message || 'Something went wrong.'}</span>
            <button data-testid="retry-button" onClick={() => void regenerate()} disabled={busy}>
              Retry
            </button>
          </div>
        )}
        <div ref={bottom} />
      </main>

      <form className="composer" onSubmit={submit}>
        <label className="attach" title="Attach images">
          + Image
          <input
            ref={fileInput}
            type="file"
            accept="image/*"
            multiple
            data-testid="attach-input"
            onChange={event => setFiles(event.target.files ?? undefined)}
          />
        </label>
        <input
          className="text-input"
          data-testid="message-input"
          placeholder="Ask the agent…"
          value={text}
          onChange={event => setText(event.target.value)}
          autoFocus
        />
        {busy ? (
          <button type="button" className="stop" data-testid="stop-button" onClick={stopAnswer}>
            Stop
          </button>
        ) : (
          <button
            type="submit"
            data-testid="send-button"
            disabled={!text.trim() && !files?.length}
          >
            Send
          </button>
        )}
        {session.voice && <MicButton session={session} busy={busy} />}
      </form>
      {files?.length ? (
        <div className="attachments" data-testid="attachment-list">
          {files.length === 1 ? '1 image' : `${files.length} images`} attached:{' '}
          {Array.from(files)
            .map(file => file.name)
            .join(', ')}
        </div>
      ) : null}
      <StatusLine session={session} status={status} />
    </>
  );
}

function StatusLine({ session, status }: { session: PlaygroundChat; status: string }) {
  const pcm = useStore(session.pcm.stats);
  return (
    <div className="statusline">
      <span>
        status: <b data-testid="chat-status">{status}</b>
      </span>
      <span>
        chat: <code data-testid="chat-id">{session.chat.id}</code>
      </span>
      {session.voice && (
        <span data-testid="pcm-status" data-chunks={pcm.chunks} data-audio={pcm.audio}>
          voice audio: {pcm.chunks} chunks, {pcm.seconds.toFixed(1)} s
          {pcm.sampleRate ? ` at ${pcm.sampleRate} Hz` : ''}
        </span>
      )}
    </div>
  );
}

type MicState = 'idle' | 'starting' | 'recording' | 'stopping';

/**
 * Voice (our transport): open the request with a message that has no text (a data-voice
 * part), then audio_control start, 100 ms PCM16 frames, audio_control stop.
 */
function MicButton({ session, busy }: { session: PlaygroundChat; busy: boolean }) {
  const [state, setState] = useState<MicState>('idle');
  const [problem, setProblem] = useState<string | undefined>();
  const [frames, setFrames] = useState(0);
  const capture = useRef<MicCapture | undefined>(undefined);
  const sending = useRef<Promise<void>>(Promise.resolve());

  useEffect(() => () => capture.current?.stop(), []);

  async function start() {
    const transport = session.voice!;
    setProblem(undefined);
    setFrames(0);
    setState('starting');
    session.pcm.unlock();
    let ready = false;
    const held: Uint8Array[] = []; // frames captured before the request is out
    const send = (pcm: Uint8Array) => {
      sending.current = sending.current
        .then(() => transport.sendAudioChunk(pcm, 16000))
        .then(() => setFrames(n => n + 1))
        .catch(error => setProblem(String(error?.message ?? error)));
    };
    try {
      capture.current = await MicCapture.start(pcm => (ready ? send(pcm) : held.push(pcm)));
      const sent = session.nextRequestSent();
      void session.chat.sendMessage({ parts: [{ type: 'data-voice', data: {} }] });
      await sent;
      await transport.sendAudioControl('start');
      ready = true;
      held.splice(0).forEach(send);
      setState('recording');
    } catch (error) {
      capture.current?.stop();
      capture.current = undefined;
      setProblem(error instanceof Error ? error.message : String(error));
      setState('idle');
    }
  }

  async function stopRecording() {
    const transport = session.voice!;
    setState('stopping');
    capture.current?.stop(); // hands over the last partial frame
    capture.current = undefined;
    try {
      await sending.current;
      await transport.sendAudioControl('stop');
    } catch (error) {
      setProblem(error instanceof Error ? error.message : String(error));
    }
    setState('idle');
  }

  const recording = state === 'recording';
  return (
    <>
      <button
        type="button"
        className={`mic ${recording ? 'on' : ''}`}
        data-testid="mic-button"
        data-recording={String(recording)}
        disabled={state === 'starting' || state === 'stopping' || (busy && !recording)}
        onClick={() => void (recording ? stopRecording() : start())}
        title="Talk to the agent (/live, the live model)"
      >
        {recording ? 'Stop talking' : 'Talk'}
      </button>
      <span className="mic-status" data-testid="mic-status" data-frames={frames}>
        {problem
          ? `mic error: ${problem}`
          : state === 'recording'
            ? `recording (${frames} frames sent)`
            : state === 'idle' && frames > 0
              ? `sent ${frames} frames`
              : state}
      </span>
    </>
  );
}
