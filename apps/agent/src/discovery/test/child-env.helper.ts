// Test-only: the environment for a spawned llmgw process, without the developer's own LLMGW_AGENT_* settings.
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('LLMGW_AGENT_')));
  return { ...base, ...extra };
}
