import type { UIMessage } from 'ai';

/** `finish.messageMetadata` as the server sends it. */
export type Metadata = {
  usage?: { inputTokens?: number; outputTokens?: number; totalTokens?: number };
  modelVersion?: string;
};

/** The data parts this server uses (see docs/live-protocol.md). */
export type DataParts = {
  /** Opens a voice turn on /live: a user message with no text. */
  voice: Record<string, unknown>;
  /** The user's spoken words (input transcription), streamed into the answer. */
  transcript: { role: 'user'; text: string; final: boolean };
  /** Transient: a chunk of the answer's audio (PCM16 LE mono, base64). */
  pcm: { data: string; mediaType: string; sampleRate: number };
  /** A tool's progress (`send_data`), one part replaced in place by its id (ADR 0025). */
  progress: { label: string; step: number; of: number };
  /** Transient: a tool's notice, for `onData` only. */
  notice: { text: string };
  /** Next to an approval request: what an in-tool confirmation asks with (ADR 0041). */
  approval: { approvalId: string; toolCallId: string; hint?: string; payload?: unknown };
  /** Added by the page to the answered message: the payload the user edited (ADR 0041). */
  'approval-response': { payload: Record<string, unknown> };
  /** The chat's shared state (ADR 0044): every key under the prefix, one part (id `state`)
   * per message, updated in place. */
  state: SharedState;
  /** Who answered (ADR 0044): the agent of the parts after it, with sub-agents only. */
  agent: { name: string };
};

/** Shared session state as the server sends it: keys as stored (prefix included) → JSON. */
export type SharedState = Record<string, unknown>;

/** The page's answer to an approval; `payload` only for a confirmation that asked with one. */
export type ApprovalAnswer = { id: string; approved: boolean; payload?: Record<string, unknown> };

export type PlaygroundMessage = UIMessage<Metadata, DataParts>;
