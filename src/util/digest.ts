/**
 * SHA-256 in hex and random hex tokens from the runtime's native hashing and the Web Crypto
 * global, not node:crypto: loading node:crypto's JavaScript (and with it the runtime's parser and
 * the shared node internals) costs a per-node process 1.3 MiB of heap and 1.9 MiB of mapped code
 * (BENCHMARKS.md, "What the runtime's node modules cost"). The digests are node:crypto's byte for
 * byte (digest.test.ts): peers of another version hash alike.
 */

/** SHA-256 of the UTF-8 of `text`, 64 lowercase hex characters. */
export function sha256Hex(text: string): string {
  return new Bun.CryptoHasher('sha256').update(text).digest('hex');
}

/** `bytes` cryptographically random bytes as 2 x bytes lowercase hex characters. */
export function randomHex(bytes: number): string {
  let hex = '';
  for (const b of crypto.getRandomValues(new Uint8Array(bytes))) hex += HEX_BYTE[b];
  return hex;
}

const HEX_BYTE = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));
