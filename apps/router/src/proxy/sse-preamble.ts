/**
 * Whether the start of an SSE response body holds only *preamble*: complete events that carry
 * no content yet — comments, and chat.completion.chunk events whose every delta says nothing
 * but its `role` (other fields absent, null, '' or []). Returns `true` while that holds (a
 * trailing incomplete event is not judged yet) and `false` as soon as a complete event carries
 * anything else (content, tool calls, a finish, usage, `[DONE]`, an error, text it cannot
 * read). Engines send such a role chunk right after their response head, before any token.
 */
export function onlyPreamble(text: string): boolean {
  let at = 0;
  for (;;) {
    const end = eventEnd(text, at);
    if (end < 0) return true;
    if (!isPreambleEvent(text.slice(at, end))) return false;
    at = nextEventStart(text, end);
  }
}

/** Index of the blank line ending the event that starts at `from`, or -1 when it has not arrived. */
function eventEnd(text: string, from: number): number {
  const lf = text.indexOf('\n\n', from);
  const crlf = text.indexOf('\r\n\r\n', from);
  if (lf < 0) return crlf;
  return crlf < 0 || lf < crlf ? lf : crlf;
}

function nextEventStart(text: string, end: number): number {
  return text.startsWith('\r\n\r\n', end) ? end + 4 : end + 2;
}

function isPreambleEvent(event: string): boolean {
  let data = '';
  for (const line of event.split(/\r?\n/)) {
    if (line === '' || line.startsWith(':')) continue;
    if (!line.startsWith('data:')) return false;
    data += line.slice(line.startsWith('data: ') ? 6 : 5);
  }
  if (data === '') return true;
  let chunk: unknown;
  try {
    chunk = JSON.parse(data);
  } catch {
    return false;
  }
  if (!isObject(chunk) || chunk.object !== 'chat.completion.chunk' || !Array.isArray(chunk.choices) || chunk.choices.length === 0) return false;
  if (chunk.usage !== undefined && chunk.usage !== null) return false;
  return chunk.choices.every((c) => isObject(c) && (c.finish_reason === undefined || c.finish_reason === null) && isObject(c.delta) && saysOnlyRole(c.delta));
}

function saysOnlyRole(delta: Record<string, unknown>): boolean {
  for (const [key, value] of Object.entries(delta)) {
    if (key === 'role') continue;
    if (value === null || value === '' || (Array.isArray(value) && value.length === 0)) continue;
    return false;
  }
  return true;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
