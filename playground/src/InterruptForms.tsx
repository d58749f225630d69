// What the page shows for the calls ADK pauses on until the user answers (ADR 0064): a
// question (`adk_request_input`) as a form built from its JSON schema, and a tool's sign-in
// (`adk_request_credential`) as a Sign in button or an API key field. Both answer with
// `addToolOutput`; the server checks the answer (docs/adr/0066).
import { useMemo, useState, type FormEvent } from 'react';
import { answerOf, fieldKey, formOf, type Field, type Values } from './schema-form';

export const INPUT_TOOL = 'adk_request_input';
export const CREDENTIAL_TOOL = 'adk_request_credential';

/** The page's answer to a call it was asked: the arguments of `addToolOutput`. */
export type ToolAnswer = { tool: string; toolCallId: string; output: unknown };

type Answer = (answer: ToolAnswer) => void;

/** ADK's arguments of an input request (`RequestInput`, or the `request_input` tool). */
type InputRequest = {
  message?: string;
  payload?: unknown;
  response_schema?: unknown;
};

/** ADK's `AuthConfig`, as far as the page reads it (the server sends it camelCased). */
type AuthConfig = {
  authScheme?: { type?: string; name?: string; in?: string };
  exchangedAuthCredential?: { oauth2?: { authUri?: string } };
  [key: string]: unknown;
};

function Refusal({ text }: { text: string | undefined }) {
  if (!text) return null;
  return (
    <div className="answer-refused" data-testid="answer-refused" role="alert">
      Not accepted: {text}
    </div>
  );
}

function FieldInput({
  field,
  value,
  onChange,
}: {
  field: Field;
  value: string | boolean | undefined;
  onChange: (value: string | boolean) => void;
}) {
  const common = {
    'aria-label': field.label,
    'data-testid': 'input-field',
    'data-field': fieldKey(field),
  };
  switch (field.kind) {
    case 'boolean':
      return (
        <input {...common} type="checkbox" checked={value === true} onChange={e => onChange(e.target.checked)} />
      );
    case 'choice':
      return (
        <select {...common} value={String(value ?? '')} onChange={e => onChange(e.target.value)}>
          <option value="">choose…</option>
          {field.choices.map((choice, index) => (
            <option key={index} value={String(index)}>
              {typeof choice === 'string' ? choice : JSON.stringify(choice)}
            </option>
          ))}
        </select>
      );
    case 'json':
      return (
        <textarea
          {...common}
          rows={3}
          placeholder="JSON"
          value={String(value ?? '')}
          onChange={e => onChange(e.target.value)}
        />
      );
    default:
      return (
        <input
          {...common}
          // No min, max or pattern: the server checks the answer against the schema.
          type={field.kind === 'text' ? 'text' : 'number'}
          step={field.kind === 'number' ? 'any' : undefined}
          value={String(value ?? '')}
          onChange={e => onChange(e.target.value)}
        />
      );
  }
}

/** A question for the user: its message, the form its `response_schema` describes, and what
 * the server said of the last answer it refused. */
export function InputRequestForm({
  toolCallId,
  input,
  refusal,
  onAnswer,
}: {
  toolCallId: string;
  input: unknown;
  refusal: string | undefined;
  onAnswer: Answer;
}) {
  const request = (input ?? {}) as InputRequest;
  const message = request.message ?? 'The agent asks for an answer.';
  const form = useMemo(() => formOf(request.response_schema, message), [request.response_schema, message]);
  const [values, setValues] = useState<Values>({});
  const [problem, setProblem] = useState<string | undefined>();

  function submit(event: FormEvent) {
    event.preventDefault();
    const answer = answerOf(form, values);
    if ('problem' in answer) return setProblem(answer.problem);
    onAnswer({ tool: INPUT_TOOL, toolCallId, output: answer.output });
  }

  return (
    <form className="input-request" data-testid="input-request" onSubmit={submit}>
      <div className="input-request-message" data-testid="input-request-message">
        {message}
      </div>
      {form.fields.map(field => (
        <label className="input-field" key={fieldKey(field)}>
          {form.object && (
            <span className="input-field-label">
              {field.label}
              {field.required ? ' *' : ''}
            </span>
          )}
          <FieldInput
            field={field}
            value={values[fieldKey(field)]}
            onChange={value => {
              setValues(held => ({ ...held, [fieldKey(field)]: value }));
              setProblem(undefined);
            }}
          />
          {field.description && <span className="input-field-hint">{field.description}</span>}
        </label>
      ))}
      {problem && (
        <div className="answer-problem" data-testid="input-request-problem" role="alert">
          {problem}
        </div>
      )}
      <Refusal text={refusal} />
      <button type="submit" data-testid="input-request-submit">
        Answer
      </button>
    </form>
  );
}

/** A tool's sign-in: with an API key scheme, a field for the key; with OAuth2 or OpenID
 * Connect, a button that opens the provider's sign-in page (the server finishes the flow). */
export function CredentialRequestForm({
  toolCallId,
  input,
  refusal,
  onAnswer,
}: {
  toolCallId: string;
  input: unknown;
  refusal: string | undefined;
  onAnswer: Answer;
}) {
  const config = ((input ?? {}) as { authConfig?: AuthConfig }).authConfig ?? {};
  const scheme = config.authScheme?.type;
  const [apiKey, setApiKey] = useState('');
  const [opened, setOpened] = useState(false);

  if (scheme === 'apiKey') {
    const submit = (event: FormEvent) => {
      event.preventDefault();
      if (!apiKey) return;
      // ADK's AuthConfig back, with the credential the user gave (README: Tool sign-in).
      const exchangedAuthCredential = { authType: 'apiKey', apiKey };
      onAnswer({ tool: CREDENTIAL_TOOL, toolCallId, output: { ...config, exchangedAuthCredential } });
    };
    return (
      <form className="credential-request" data-testid="credential-request" data-scheme={scheme} onSubmit={submit}>
        <label className="input-field">
          <span className="input-field-label">
            API key{config.authScheme?.name ? ` (${config.authScheme.name})` : ''}
          </span>
          <input
            type="password"
            autoComplete="off"
            data-testid="credential-api-key"
            value={apiKey}
            onChange={e => setApiKey(e.target.value)}
          />
        </label>
        <Refusal text={refusal} />
        <button type="submit" data-testid="credential-submit" disabled={!apiKey}>
          Send key
        </button>
      </form>
    );
  }

  const authUri = config.exchangedAuthCredential?.oauth2?.authUri;
  if ((scheme === 'oauth2' || scheme === 'openIdConnect') && authUri) {
    return (
      <div className="credential-request" data-testid="credential-request" data-scheme={scheme}>
        <button
          type="button"
          data-testid="sign-in-button"
          onClick={() => {
            // A tab of its own: the provider's page, then its redirect, which the server takes.
            window.open(authUri, '_blank', 'noopener,noreferrer');
            setOpened(true);
          }}
        >
          Sign in
        </button>
        {opened && <span data-testid="sign-in-opened">Finish signing in in the new tab.</span>}
        <Refusal text={refusal} />
      </div>
    );
  }
  return (
    <div className="credential-request" data-testid="credential-request" data-scheme={scheme ?? ''}>
      This tool asks for a sign-in the playground cannot do ({scheme ?? 'no scheme'}).
    </div>
  );
}
