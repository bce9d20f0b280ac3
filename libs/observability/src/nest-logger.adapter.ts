import type { LoggerService } from '@nestjs/common';
import type { Logger } from 'pino';

type PinoLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * Routes Nest's own logging (and every `new Logger(Context)` in the apps) into pino. Nest passes
 * the context as the last string argument; it becomes the `context` field. An object message
 * becomes fields, an Error becomes `err`.
 */
export class PinoNestLogger implements LoggerService {
  constructor(private readonly logger: Logger) {}

  log(message: unknown, ...params: unknown[]): void {
    this.write('info', message, params);
  }

  error(message: unknown, ...params: unknown[]): void {
    this.write('error', message, params, true);
  }

  warn(message: unknown, ...params: unknown[]): void {
    this.write('warn', message, params);
  }

  debug(message: unknown, ...params: unknown[]): void {
    this.write('debug', message, params);
  }

  verbose(message: unknown, ...params: unknown[]): void {
    this.write('trace', message, params);
  }

  fatal(message: unknown, ...params: unknown[]): void {
    this.write('fatal', message, params, true);
  }

  private write(level: PinoLevel, message: unknown, params: unknown[], mayHaveStack = false): void {
    if (!this.logger.isLevelEnabled(level)) return;
    const rest = [...params];
    const fields: Record<string, unknown> = {};
    if (rest.length > 0 && typeof rest[rest.length - 1] === 'string') fields['context'] = rest.pop();
    // Nest's error(message, stack, context): a remaining string is the stack trace.
    if (mayHaveStack && typeof rest[0] === 'string') fields['stack'] = rest.shift();
    const error = rest.find((extra) => extra instanceof Error);
    const extras = rest.filter((extra) => extra !== undefined && !(extra instanceof Error));
    if (error) fields['err'] = error;
    if (extras.length > 0) fields['extra'] = extras;
    let msg: string;
    if (message instanceof Error) {
      fields['err'] = message;
      msg = message.message;
    } else if (message !== null && typeof message === 'object') {
      const { msg: m, message: mm, ...others } = message as Record<string, unknown>;
      Object.assign(fields, others);
      msg = typeof m === 'string' ? m : typeof mm === 'string' ? mm : '';
    } else {
      msg = String(message);
    }
    this.logger[level](fields, msg);
  }
}
