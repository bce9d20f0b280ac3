/** Characters allowed in a header field name (RFC 9110 token), indexed by char code. */
export const TOKEN = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") TOKEN[c.charCodeAt(0)] = 1;

/** True for the char code of an ASCII digit. */
export const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;
