/**
 * The identity a verified peer certificate names: its subject CN (a node id or router id for an
 * llmgw client certificate), or undefined when there is none, it is empty or it is given more
 * than once (Node lists repeated attributes as an array). Pass `call.getAuthContext()
 * .sslPeerCertificate`: grpc-js sets it only for a client certificate TLS has verified against
 * the server's CA (mTLS); without one the auth context is empty and this is undefined.
 */
export function certificateIdentity(peer: { subject?: { CN?: string | string[] }; subjectaltname?: string } | undefined): string | undefined {
  const cn = peer?.subject?.CN;
  return typeof cn === 'string' && cn !== '' ? cn : undefined;
}
