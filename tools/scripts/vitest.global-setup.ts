// Once per vitest run: the test PKI every gRPC connection of the tests runs over (libs/testing/src/grpc-tls.ts).
import { rmSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import { createTestPki } from '../../libs/testing/src/grpc-tls';

declare module 'vitest' {
  export interface ProvidedContext {
    grpcTlsEnv: Record<string, string>;
  }
}

export default async function setup(project: TestProject): Promise<() => void> {
  const pki = await createTestPki();
  project.provide('grpcTlsEnv', { LLMGW_GRPC_TLS_CA: pki.caFile, LLMGW_GRPC_TLS_CERT: pki.certFile, LLMGW_GRPC_TLS_KEY: pki.keyFile });
  return () => rmSync(pki.dir, { recursive: true, force: true });
}
