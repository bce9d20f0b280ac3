// Test-only: a DiscoveryLogger that keeps what it was told.
import type { DiscoveryLogger } from '../discovery.logger';

export interface LogEntry {
  readonly level: 'info' | 'warn';
  readonly fields: Record<string, unknown>;
  readonly message: string;
}

export class RecordingLogger implements DiscoveryLogger {
  readonly entries: LogEntry[] = [];
  info(fields: Record<string, unknown>, message: string): void {
    this.entries.push({ level: 'info', fields, message });
  }
  warn(fields: Record<string, unknown>, message: string): void {
    this.entries.push({ level: 'warn', fields, message });
  }
  warnings(): LogEntry[] {
    return this.entries.filter((e) => e.level === 'warn');
  }
}
