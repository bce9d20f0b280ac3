/** An address with IPv6 literals in brackets, so `:port` can follow it. */
export function hostForPort(address: string): string {
  return address.includes(':') && !address.startsWith('[') ? `[${address}]` : address;
}

/** `http://host:port` for an engine on a node's address, with IPv6 literals bracketed. */
export function engineUrl(address: string, port: number): string {
  return `http://${hostForPort(address)}:${port}`;
}
