import { status } from '@grpc/grpc-js';
import { ErrorCode, GRPC_STATUS_OF, GrpcCode } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';

describe('the gRPC status table', () => {
  it("names grpc-js's own numbers", () => {
    for (const [name, value] of Object.entries(GrpcCode)) expect(status[name as keyof typeof status], name).toBe(value);
  });

  it('gives every domain code a status that is not OK or UNKNOWN', () => {
    for (const code of Object.values(ErrorCode)) expect([status.OK, status.UNKNOWN]).not.toContain(GRPC_STATUS_OF[code]);
    expect(GRPC_STATUS_OF[ErrorCode.Fenced]).toBe(status.UNAVAILABLE);
  });
});
