/**
 * The logging discovery needs. Shaped like pino's `(fields, message)` so a pino logger fits
 * as is; the CLI passes a small stderr writer.
 */
export interface DiscoveryLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}
