/**
 * Checks one controller address, `host:port` or `[ipv6]:port`; returns why not, or undefined when
 * it is fine.
 */
export function controllerAddressProblem(address: string): string | undefined {
  const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})$/.exec(address);
  if (!m) return 'expected host:port (or [ipv6]:port)';
  const port = Number(m[3]);
  if (port < 1 || port > 65_535) return `port ${port} is outside 1..65535`;
  return undefined;
}
