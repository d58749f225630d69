// The open chat's shared state (README "Shared state", ADR 0044): the data of the last
// `data-state` part of its messages, key → value, and changes the user makes to it, sent with
// the next message as the request's `state` field.
import { useChat } from '@ai-sdk/react';
import { useState } from 'react';
import type { PlaygroundChat } from './chat';
import { useStore } from './store';
import type { PlaygroundMessage, SharedState } from './types';

/** The chat's state now: the server updates one part per message in place, and the latest
 * message that has one holds every shared key (undefined when no response ever sent one). */
export function sharedState(messages: PlaygroundMessage[]): SharedState | undefined {
  for (let m = messages.length - 1; m >= 0; m--) {
    const parts = messages[m].parts;
    for (let p = parts.length - 1; p >= 0; p--) {
      const part = parts[p];
      if (part.type === 'data-state') return part.data;
    }
  }
  return undefined;
}

type Scalar = string | number | boolean | null;

function isScalar(value: unknown): value is Scalar {
  return value === null || ['string', 'number', 'boolean'].includes(typeof value);
}

function scalarText(value: Scalar): string {
  return value === null ? 'null' : String(value);
}

/** A value a person can read: a scalar as text, an object of scalars (the wallet's
 * `{balance: 950}`) as field: value lines, anything deeper as indented JSON. */
function ValueView({ value }: { value: unknown }) {
  if (isScalar(value)) return <span className="state-scalar">{scalarText(value)}</span>;
  if (typeof value === 'object' && !Array.isArray(value)) {
    const fields = Object.entries(value as Record<string, unknown>);
    if (fields.length > 0 && fields.every(([, field]) => isScalar(field))) {
      return (
        <dl className="state-fields">
          {fields.map(([name, field]) => (
            <div key={name} className="state-field" data-testid="state-field" data-field={name}>
              <dt>{name}</dt>
              <dd>{scalarText(field as Scalar)}</dd>
            </div>
          ))}
        </dl>
      );
    }
  }
  return <pre className="state-json">{JSON.stringify(value, null, 2)}</pre>;
}

/** One key: its value, and an editor whose JSON goes into the pending changes. */
function Entry({
  name,
  value,
  pending,
  onChange,
}: {
  name: string;
  value: unknown;
  pending: boolean;
  onChange: (value: unknown) => void;
}) {
  const [draft, setDraft] = useState<string | undefined>();
  const [problem, setProblem] = useState<string | undefined>();

  function save() {
    try {
      onChange(JSON.parse(draft ?? 'null'));
      setDraft(undefined);
      setProblem(undefined);
    } catch {
      setProblem('Not JSON: a value is JSON, e.g. {"balance": 5} or "dark".');
    }
  }

  return (
    <li
      className={`state-entry ${pending ? 'pending' : ''}`}
      data-testid="state-entry"
      data-key={name}
      data-value={JSON.stringify(value)}
      data-pending={String(pending)}
    >
      <div className="state-head">
        <code className="state-key" data-testid="state-key">
          {name}
        </code>
        {draft === undefined && (
          <button
            type="button"
            data-testid="state-edit-button"
            onClick={() => setDraft(JSON.stringify(value, null, 2))}
          >
            Edit
          </button>
        )}
      </div>
      {draft === undefined ? (
        <div className="state-value" data-testid="state-value">
          <ValueView value={value} />
        </div>
      ) : (
        <div className="state-editor">
          <textarea
            data-testid="state-edit-input"
            aria-label={`New value of ${name} (JSON)`}
            value={draft}
            rows={Math.min(8, draft.split('\n').length + 1)}
            onChange={event => setDraft(event.target.value)}
          />
          {problem && (
            <span className="state-problem" role="alert" data-testid="state-edit-error">
              {problem}
            </span>
          )}
          <div className="state-actions">
            <button type="button" data-testid="state-edit-save" onClick={save}>
              Save
            </button>
            <button
              type="button"
              data-testid="state-edit-cancel"
              onClick={() => {
                setDraft(undefined);
                setProblem(undefined);
              }}
            >
              Cancel
            </button>
          </div>
        </div>
      )}
    </li>
  );
}

/** Beside the conversation: the shared state of the chat shown. */
export function StatePanel({ session }: { session: PlaygroundChat }) {
  // The same Chat as the conversation's: its messages, updated while a response streams.
  const { messages } = useChat({ chat: session.chat });
  const pending = useStore(session.pendingState);
  const stored = sharedState(messages) ?? {};
  // What the user changed shows at once, marked, until the next message takes it.
  const shown: SharedState = { ...stored, ...pending };
  const names = Object.keys(shown).sort();
  return (
    <>
      <h2>Shared state</h2>
      {names.length === 0 ? (
        <p className="hint" data-testid="state-empty">
          No shared state in this chat yet: an agent shares the session keys under a prefix,{' '}
          <code>ui:</code> by default (the demo's wallet, <code>ui:wallet</code>, after a
          payment).
        </p>
      ) : (
        <ul className="state-list" data-testid="state-list">
          {names.map(name => (
            <Entry
              key={name}
              name={name}
              value={shown[name]}
              pending={name in pending}
              onChange={value => session.pendingState.set({ ...pending, [name]: value })}
            />
          ))}
        </ul>
      )}
      {Object.keys(pending).length > 0 && (
        <p className="state-pending" data-testid="state-pending">
          Changed here: sent with your next message.{' '}
          <button
            type="button"
            data-testid="state-discard"
            onClick={() => session.pendingState.set({})}
          >
            Discard
          </button>
        </p>
      )}
    </>
  );
}
