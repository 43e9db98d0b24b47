import { afterAll, beforeAll, expect, test } from 'bun:test';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clientCertificateAuthenticator } from '../../src/server/auth/client-certificates.ts';

/**
 * The client-certificate authenticator (--client-ca-file) against the reference reader: Go's
 * crypto/x509 as kube-apiserver's x509 authenticator uses it (x509-verify/, stdlib only). The Go
 * program crafts the chains (non-CA and keyCertSign-less intermediates, expiry, path lengths,
 * critical extensions, name constraints, extended key usages, issuer names equal only after
 * canonicalisation, SHA-1, and subjects with escapes, multi-valued RDNs, several CNs and Os, every
 * string type and non-string values), reads each as Go does, and the same bytes go to the
 * authenticator. A chain accepted that Go refuses, or a user or groups other than Go's reading,
 * fails; so does a chain refused that Go accepts, unless it is one of the refusals by design below.
 */

/** Go accepts these; the authenticator refuses them on purpose (see x509/certificate.ts and docs/migrating.md). */
const STRICTER_BY_DESIGN = new Set([
  'name constraints: DNS name inside', // name constraints are not implemented: a CA carrying them is refused
  'name constraints: leaf without names',
  'RSA-PSS signature', // signatures: RSA PKCS#1 v1.5, ECDSA, Ed25519 only
  'subject: empty RDN', // the runtime (BoringSSL) cannot parse it: its TLS would not take it either
  // Name values with two readings (src/x509/directory-string.ts): Go 1.26 reads these T61 bytes as
  // Latin-1, older Go as raw bytes; Go strips a BMPString's trailing NUL, so "bmp" and "bmp\0" are one user.
  'subject: T61String Latin-1',
  'subject: BMPString ending in NUL',
]);

const GO = ['/usr/local/go/bin/go', ...(process.env.PATH ?? '').split(':').map((d) => join(d, 'go'))].find((p) => existsSync(p));
const SOURCE = join(import.meta.dir, 'x509-verify');

interface GoCase { name: string; roots: string[]; chain: string[]; now: string }
interface GoResult { name: string; ok: boolean; error?: string; user: string; groups: string[] }

let dir: string;
let binary: string;

function run(cmd: string[], stdin?: string, cwd?: string): string {
  const out = Bun.spawnSync(cmd, { cwd, stdin: stdin === undefined ? 'ignore' : Buffer.from(stdin), stdout: 'pipe', stderr: 'pipe' });
  if (out.exitCode !== 0) throw new Error(`${cmd.join(' ')} failed (exit ${out.exitCode}): ${out.stderr.toString()}`);
  return out.stdout.toString();
}

beforeAll(() => {
  if (!GO) throw new Error('go not found: install Go 1.26 (https://go.dev/dl/, into /usr/local/go) to run the x509 differential test');
  dir = mkdtempSync(join(tmpdir(), 'edge-ccm-x509-verify-'));
  binary = join(dir, 'x509-verify');
  run([GO, 'build', '-buildvcs=false', '-o', binary, '.'], undefined, SOURCE);
}, 120_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** What the authenticator makes of a case: the user and groups, or undefined for nobody. */
function ours(c: GoCase): { user: string; groups: string[] } | undefined {
  let chain: X509Certificate[];
  try {
    chain = c.chain.map((p) => new X509Certificate(p));
  } catch {
    return undefined; // the runtime's TLS would not take it either
  }
  let auth;
  try {
    auth = clientCertificateAuthenticator({ clientCaPem: c.roots.join('\n') });
  } catch {
    return undefined; // a bundle refused at start authenticates nobody
  }
  const found = auth.authenticate(chain, new Headers(), new Date(c.now));
  return found && { user: found.user.username, groups: [...found.user.groups] };
}

test('client certificates: accepted only as Go accepts them, the user and groups as Go reads them', () => {
  const cases = JSON.parse(run([binary, 'generate'])) as GoCase[];
  const results = JSON.parse(run([binary, 'verify'], JSON.stringify(cases))) as GoResult[];
  expect(results.length).toBe(cases.length);
  const problems: string[] = [];
  let accepted = 0;
  for (const [i, c] of cases.entries()) {
    const go = results[i]!;
    // k8s.io/apiserver's CommonNameUserConversion: a chain without a common name is nobody.
    const goUser = go.ok && go.user !== '' ? { user: go.user, groups: go.groups } : undefined;
    const mine = ours(c);
    if (goUser) accepted++;
    if (mine && !goUser) problems.push(`${c.name}: accepted as ${JSON.stringify(mine)}, Go: ${go.ok ? 'no user' : go.error}`);
    else if (mine && goUser && JSON.stringify(mine) !== JSON.stringify(goUser)) problems.push(`${c.name}: read as ${JSON.stringify(mine)}, Go reads ${JSON.stringify(goUser)}`);
    else if (!mine && goUser && !STRICTER_BY_DESIGN.has(c.name)) problems.push(`${c.name}: refused, Go accepts ${JSON.stringify(goUser)}`);
    else if (mine && STRICTER_BY_DESIGN.has(c.name)) problems.push(`${c.name}: listed as refused by design, but accepted`);
  }
  expect(problems).toEqual([]);
  // Not vacuous: both sides of the line are exercised.
  expect(accepted).toBeGreaterThan(15);
  expect(cases.length - accepted).toBeGreaterThan(30);
}, 60_000);
