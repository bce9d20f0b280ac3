// "Ready" for a person means a request works: the router lists the model and a tiny completion
// through it comes back.

/** What the last probe saw, for the progress line and the timeout message. */
export type ProbeResult = { ready: true; reply: string } | { ready: false; reason: string };

/**
 * One probe of the router at `baseUrl` (…/v1): `GET /models` must list `model`, then a
 * non-streamed chat completion of at most 4 tokens must answer 200 with a choice. Never throws.
 */
export async function probeServing(baseUrl: string, model: string, timeoutMs = 20_000): Promise<ProbeResult> {
  try {
    const models = await fetch(`${baseUrl}/models`, { signal: AbortSignal.timeout(timeoutMs) });
    const listed = (await models.json().catch(() => undefined)) as { data?: { id?: unknown }[] } | undefined;
    if (!models.ok) return { ready: false, reason: `GET /v1/models answered ${models.status}` };
    if (!listed?.data?.some((m) => m.id === model)) return { ready: false, reason: `the router does not list ${model} yet` };
    const res = await fetch(`${baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'ping' }], max_tokens: 4 }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    if (res.status !== 200) return { ready: false, reason: `a test completion answered ${res.status}: ${errorMessage(text)}` };
    const body = JSON.parse(text) as { choices?: { message?: { content?: unknown } }[] };
    const content = body.choices?.[0]?.message?.content;
    if (typeof content !== 'string') return { ready: false, reason: 'a test completion came back without a message' };
    return { ready: true, reply: content };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return { ready: false, reason: cause === 'ECONNREFUSED' ? 'the router is not listening yet' : (error as Error).message };
  }
}

function errorMessage(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } };
    if (typeof body.error?.message === 'string') return body.error.message;
  } catch {
    // not JSON
  }
  return text.slice(0, 200);
}
