/** One variable that failed validation: its name, how its value reads in the error, and why. */
export interface ConfigProblem {
  /** The environment variable (or dotted path for a cross-field rule). */
  variable: string;
  /** The value as shown to the operator: quoted, `(unset)`, or `<redacted>` for secrets. */
  shown: string;
  reason: string;
}

/**
 * Configuration refused at boot. The message lists every problem, one per line, so an
 * operator fixes them all in one go instead of one restart per typo.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';

  constructor(readonly problems: readonly ConfigProblem[]) {
    super(
      `invalid configuration (${problems.length} ${problems.length === 1 ? 'problem' : 'problems'}):\n` +
        problems.map((p) => `  ${p.variable}${p.shown === '(unset)' ? ' (unset)' : `=${p.shown}`}: ${p.reason}`).join('\n'),
    );
  }
}

const SECRET_NAME = /PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|CREDENTIAL|PRIVATE_?KEY/i;

/**
 * How a variable's value may appear in an error or a log: secrets by name are `<redacted>`, a
 * password inside a URL becomes `***`, long values are cut at 120 characters.
 */
export function showValue(variable: string, value: string | undefined): string {
  if (value === undefined) return '(unset)';
  if (SECRET_NAME.test(variable)) return '<redacted>';
  const shown = JSON.stringify(redactUrlPassword(value));
  return shown.length > 120 ? `${shown.slice(0, 117)}..."` : shown;
}

/** `scheme://user:secret@host/...` → `scheme://user:***@host/...`; any other text is returned unchanged. */
export function redactUrlPassword(text: string): string {
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)([^@/\s]*)@/i, (_, head: string) => `${head}***@`);
}
