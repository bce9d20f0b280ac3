import { describe, expect, it } from 'vitest';
import { parseOwner } from './advertised-lease.store';

describe('parseOwner', () => {
  it('reads the owner id, the gRPC address and the admin URL, each only when written', () => {
    expect(parseOwner('a1b2')).toEqual({ owner: 'a1b2' });
    expect(parseOwner('a1b2@10.0.0.2:8082')).toEqual({ owner: 'a1b2', address: '10.0.0.2:8082' });
    expect(parseOwner('a1b2@10.0.0.2:8082 http://10.0.0.2:8081')).toEqual({ owner: 'a1b2', address: '10.0.0.2:8082', adminUrl: 'http://10.0.0.2:8081' });
    expect(parseOwner('a1b2@ https://ctl:9443')).toEqual({ owner: 'a1b2', adminUrl: 'https://ctl:9443' });
    expect(parseOwner('a1b2@[::1]:8082')).toEqual({ owner: 'a1b2', address: '[::1]:8082' });
  });
});
