// An answer the server refused (ADR 0064: it does not fit the question, or the call no longer
// waits): nothing resumed, so the page asks again, saying why (docs/adr/0066).
import { isToolUIPart } from 'ai';
import type { PlaygroundMessage } from './types';

type Part = PlaygroundMessage['parts'][number];

/** The server's reason, from the error the chat got: a 4xx body's `detail` on POST /stream,
 * the `error` chunk's text on a socket. */
export function reasonOf(error: Error): string {
  try {
    const body: unknown = JSON.parse(error.message);
    const detail = (body as { detail?: unknown } | null)?.detail;
    if (typeof detail === 'string') return detail;
  } catch {
    // not a JSON body: the socket's text as it is
  }
  return error.message || 'the server refused the answer';
}

/** The messages with the answers to these calls taken back: their parts wait again. */
export function withAnswersTakenBack(
  messages: PlaygroundMessage[],
  calls: ReadonlySet<string>,
): PlaygroundMessage[] {
  return messages.map(message => {
    if (!message.parts.some(p => isToolUIPart(p) && calls.has(p.toolCallId))) return message;
    const parts = message.parts.map((part): Part => {
      if (!isToolUIPart(part) || !calls.has(part.toolCallId) || part.state !== 'output-available') {
        return part;
      }
      const { output: _refused, ...waiting } = part;
      return { ...waiting, state: 'input-available' } as Part;
    });
    return { ...message, parts };
  });
}
