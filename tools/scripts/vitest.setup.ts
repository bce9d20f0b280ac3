// Before each test file: this test process (and every process it starts) serves and dials gRPC
// over TLS with the run's test PKI (tools/scripts/vitest.global-setup.ts).
import { inject } from 'vitest';

Object.assign(process.env, inject('grpcTlsEnv'));
