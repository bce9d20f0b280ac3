import { describe, expect, it } from 'vitest';
import { engineUrl, hostForPort } from './engine-url';

describe('engineUrl', () => {
  it.each([
    ['10.0.0.1', 80, 'http://10.0.0.1:80'],
    ['node-1.local', 8000, 'http://node-1.local:8000'],
    ['fe80::1', 8000, 'http://[fe80::1]:8000'],
    ['[fe80::1]', 8000, 'http://[fe80::1]:8000'],
  ])('%s port %i → %s', (address, port, url) => {
    expect(engineUrl(address, port)).toBe(url);
  });

  it('brackets an IPv6 literal once, and leaves names and IPv4 as they are', () => {
    expect(hostForPort('::1')).toBe('[::1]');
    expect(hostForPort('[::1]')).toBe('[::1]');
    expect(hostForPort('10.0.0.2')).toBe('10.0.0.2');
  });
});
