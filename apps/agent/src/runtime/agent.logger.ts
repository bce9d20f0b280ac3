/**
 * The logging the agent's parts need. Shaped like pino's `(fields, message)`, so the process
 * logger (or a `child({ context })` of it) fits as is and tests pass a recorder.
 */
export interface AgentLogger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** A logger that drops everything (tests that do not look at logs). */
export const SILENT_LOGGER: AgentLogger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** The message of any thrown value. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
