import { getToolName, isToolUIPart, type DynamicToolUIPart, type ToolUIPart } from 'ai';
import { useState } from 'react';
import { BROWSER_TOOLS } from './chat';
import {
  CREDENTIAL_TOOL,
  CredentialRequestForm,
  INPUT_TOOL,
  InputRequestForm,
  type ToolAnswer,
} from './InterruptForms';
import type { ApprovalAnswer, DataParts, PlaygroundMessage } from './types';

type Part = PlaygroundMessage['parts'][number];
type ToolPart = ToolUIPart | DynamicToolUIPart;
type Respond = (answer: ApprovalAnswer) => void;
type Asked = DataParts['approval'];

/** What the page does with the calls the user answers: approvals, questions and sign-ins,
 * and the server's reason for each answer it refused, by call. */
export type Answering = {
  onRespond: Respond;
  onAnswer: (answer: ToolAnswer) => void;
  refusals: Record<string, string>;
};

/** JSON on one line when it is short, else indented. */
function json(value: unknown): string {
  const pretty = JSON.stringify(value, null, 2) ?? 'undefined';
  const line = pretty.replace(/\n\s*/g, ' ');
  return line.length <= 90 ? line : pretty;
}

/** What a tool part's state means, in words. */
function stateLabel(part: ToolPart): string {
  const browser = BROWSER_TOOLS[getToolName(part)] !== undefined;
  switch (part.state) {
    case 'input-streaming':
      return 'receiving the call…';
    case 'input-available':
      if (getToolName(part) === INPUT_TOOL) return 'waiting for your answer';
      if (getToolName(part) === CREDENTIAL_TOOL) return 'waiting for you to sign in';
      if (!browser) return 'running on the server…';
      // The server hands an approved browser call back as input-available, approval kept.
      if ((part as { approval?: { approved?: boolean } }).approval?.approved === true) {
        return 'approved: running in the browser…';
      }
      return BROWSER_TOOLS[getToolName(part)].needsApproval
        ? 'waiting for approval…'
        : 'running in the browser…';
    case 'approval-requested':
      return 'needs your approval';
    case 'approval-responded':
      return part.approval.approved ? 'approved: sending…' : 'denied: sending…';
    case 'output-available':
      return 'done';
    case 'output-error':
      return 'failed';
    case 'output-denied':
      return 'denied';
    default:
      return '';
  }
}

/**
 * Approve / Deny, with the confirmation's hint and its payload as JSON the user may edit
 * (the `data-approval` part next to the request, ADR 0041).
 */
function ApprovalView({ id, asked, onRespond }: { id: string; asked?: Asked; onRespond: Respond }) {
  const asksPayload = asked?.payload !== undefined;
  // The data part may arrive a render after the request: until the user types, show it as sent.
  const [edited, setText] = useState<string | undefined>();
  const text = edited ?? (asksPayload ? JSON.stringify(asked.payload, null, 2) : '');
  const [problem, setProblem] = useState<string | undefined>();

  function approve() {
    if (!asksPayload) return onRespond({ id, approved: true });
    try {
      const payload: unknown = JSON.parse(text);
      if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
        return setProblem('The payload must be a JSON object.');
      }
      onRespond({ id, approved: true, payload: payload as Record<string, unknown> });
    } catch {
      setProblem('The payload is not valid JSON.');
    }
  }

  return (
    <div className="approval" data-testid="approval">
      <span data-testid="approval-hint">{asked?.hint ?? 'Allow this call?'}</span>
      {asksPayload && (
        <textarea
          className="approval-payload"
          data-testid="approval-payload"
          value={text}
          rows={Math.min(8, text.split('\n').length)}
          onChange={event => {
            setText(event.target.value);
            setProblem(undefined);
          }}
        />
      )}
      {problem && (
        <span className="approval-problem" data-testid="approval-payload-error" role="alert">
          {problem}
        </span>
      )}
      <button className="approve" data-testid="approve-button" onClick={approve}>
        Approve
      </button>
      <button className="deny" data-testid="deny-button" onClick={() => onRespond({ id, approved: false })}>
        Deny
      </button>
    </div>
  );
}

export function ToolPartView({
  part,
  asked,
  answering,
}: {
  part: ToolPart;
  asked?: Asked;
  answering: Answering;
}) {
  const name = getToolName(part);
  const waiting = part.state === 'input-available';
  const refusal = answering.refusals[part.toolCallId];
  return (
    <div
      className={`tool state-${part.state}`}
      data-testid="tool-part"
      data-tool-name={name}
      data-tool-state={part.state}
      data-tool-call-id={part.toolCallId}
    >
      <div className="tool-head">
        <span className="tool-name" data-testid="tool-name">
          {name}
        </span>
        <span className="badge" data-testid="tool-state">
          {part.state}
        </span>
        <span className="tool-label">{stateLabel(part)}</span>
      </div>
      {part.input !== undefined && (
        <pre className="tool-input" data-testid="tool-input" data-label="input">
          {json(part.input)}
        </pre>
      )}
      {part.state === 'approval-requested' && (
        <ApprovalView id={part.approval.id} asked={asked} onRespond={answering.onRespond} />
      )}
      {waiting && name === INPUT_TOOL && (
        <InputRequestForm
          toolCallId={part.toolCallId}
          input={part.input}
          refusal={refusal}
          onAnswer={answering.onAnswer}
        />
      )}
      {waiting && name === CREDENTIAL_TOOL && (
        <CredentialRequestForm
          toolCallId={part.toolCallId}
          input={part.input}
          refusal={refusal}
          onAnswer={answering.onAnswer}
        />
      )}
      {part.state === 'output-available' && (
        <pre className="tool-output" data-testid="tool-output" data-label="output">
          {json(part.output)}
        </pre>
      )}
      {part.state === 'output-error' && (
        <div className="tool-error" data-testid="tool-error">
          Error: {part.errorText}
        </div>
      )}
      {part.state === 'output-denied' && (
        <div className="tool-denied" data-testid="tool-denied">
          denied{part.approval?.reason ? `: ${part.approval.reason}` : ''}
        </div>
      )}
    </div>
  );
}

function PartView({ part, asked, answering }: { part: Part; asked: Asked[]; answering: Answering }) {
  if (isToolUIPart(part)) {
    const mine = asked.find(a => part.state === 'approval-requested' && a.approvalId === part.approval.id);
    return <ToolPartView part={part} asked={mine} answering={answering} />;
  }
  switch (part.type) {
    case 'reasoning':
      return (
        <details className="reasoning" data-testid="reasoning-part" data-state={part.state ?? 'done'}>
          <summary>{part.state === 'streaming' ? 'Thinking…' : 'Reasoning'}</summary>
          <div className="reasoning-text">{part.text}</div>
        </details>
      );
    case 'file':
      return part.mediaType.startsWith('image/') ? (
        <img
          className="file-image"
          data-testid="file-part"
          data-media-type={part.mediaType}
          src={part.url}
          alt={part.filename ?? 'image'}
        />
      ) : (
        <a className="file-link" data-testid="file-part" data-media-type={part.mediaType} href={part.url} download={part.filename}>
          {part.filename ?? part.mediaType}
        </a>
      );
    case 'data-progress':
      return (
        <div className="progress" data-testid="progress-part" data-step={part.data.step}>
          <progress max={part.data.of} value={part.data.step} /> {part.data.label}
        </div>
      );
    case 'source-url':
      return (
        <a className="source" data-testid="source-part" href={part.url} target="_blank" rel="noreferrer">
          {part.title ?? part.url}
        </a>
      );
    case 'source-document':
      return (
        <span className="source" data-testid="source-part" title={part.filename}>
          {part.title}
        </span>
      );
    case 'data-voice':
      return (
        <div className="voice" data-testid="voice-part">
          (voice message)
        </div>
      );
    default:
      // step-start, data-transcript (shown apart), data-pcm (never stored), data-state (its
      // panel), data-agent
      return null;
  }
}

type TextPart = Extract<Part, { type: 'text' }>;

/**
 * Runs of adjacent text parts, shown as one paragraph: on /live with audio each
 * piece of the spoken answer may arrive as its own text part.
 */
function groupText(parts: Part[]): (Part | TextPart[])[] {
  const groups: (Part | TextPart[])[] = [];
  for (const part of parts) {
    const last = groups.at(-1);
    if (part.type !== 'text') groups.push(part);
    else if (Array.isArray(last)) last.push(part);
    else groups.push([part]);
  }
  return groups;
}

export function MessageView({
  message,
  answering,
}: {
  message: PlaygroundMessage;
  answering: Answering;
}) {
  // The user's spoken words arrive in the answer: show them on the user's side.
  const transcripts = message.parts.filter(p => p.type === 'data-transcript');
  // step-start parts stay in: they keep the text of two steps apart.
  const parts = message.parts.filter(p => p.type !== 'data-transcript');
  // The shared state is shown in its panel, not in the message.
  const visible = parts.some(p => !['step-start', 'data-state', 'data-agent'].includes(p.type));
  const usage = message.metadata?.usage;
  const asked = message.parts.flatMap(p => (p.type === 'data-approval' ? [p.data] : []));
  return (
    <div
      className={`message ${message.role}`}
      data-testid="message"
      data-role={message.role}
      data-message-id={message.id}
    >
      {transcripts.map((part, i) => (
        <div className="row user" key={`t${i}`}>
          <div className="bubble user transcript" data-testid="transcript" data-final={String(part.data.final)}>
            You said: {part.data.text}
          </div>
        </div>
      ))}
      {visible && (
        <div className={`row ${message.role}`}>
          <div className={`bubble ${message.role}`}>
            <div className="role">{message.role === 'user' ? 'You' : 'Agent'}</div>
            {groupText(parts).map((group, i) =>
              Array.isArray(group) ? (
                <div className="text" key={i}>
                  {group.map((part, j) => (
                    <span key={j} data-testid="text-part" data-state={part.state ?? 'done'}>
                      {part.text}
                    </span>
                  ))}
                </div>
              ) : (
                <PartView key={i} part={group} asked={asked} answering={answering} />
              ),
            )}
            {usage?.totalTokens != null && (
              <div className="usage" data-testid="message-usage">
                {usage.totalTokens} tokens
              </div>
            )}
          </div>
        </div>
      )}
    </div>
  );
}
