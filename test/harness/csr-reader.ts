import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Go's reading of certificate requests, as the API server and the kubelet-serving signer read
 * them: test/differential/csr-reader (standard library only, so no module download), built once
 * per source into the cache and run once for a whole batch.
 */

const SOURCE = join(import.meta.dir, '../differential/csr-reader');

export interface GoReading {
  cn: string;
  o: string[];
  dns: string[];
  ips: string[];
  emails: string[];
  uris: string[];
  keyType?: string;
}

export interface GoVerdict {
  id: string;
  apiServer: { ok: boolean; error?: string };
  request?: GoReading;
  signatureOk: boolean;
  signer: { ok: boolean; error?: string };
  /** The certificate the signer signs, read back. */
  signed?: GoReading;
}

export interface CsrInput {
  id: string;
  /** spec.request's bytes (the PEM text). */
  request: Uint8Array;
  usages: readonly string[];
}

/** The go command: on PATH, else where the official tarball puts it. */
function goCommand(): string {
  const onPath = Bun.which('go');
  if (onPath) return onPath;
  if (existsSync('/usr/local/go/bin/go')) return '/usr/local/go/bin/go';
  throw new Error('go not found (on PATH or /usr/local/go/bin): the CSR differential test builds test/differential/csr-reader with it. Install Go 1.24 or newer (https://go.dev/doc/install: unpack the tarball to /usr/local/go), or `apt-get install golang-go` on Debian 13');
}

function cacheRoot(): string {
  return process.env.EDGE_CCM_CACHE || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'edge-ccm');
}

/** Builds the reader (once per source version) and returns its path. */
export async function buildCsrReader(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of ['go.mod', 'main.go']) hash.update(readFileSync(join(SOURCE, file)));
  const dir = join(cacheRoot(), 'csr-reader');
  const binary = join(dir, `csr-reader-${hash.digest('hex').slice(0, 16)}`);
  if (existsSync(binary)) return binary;
  mkdirSync(dir, { recursive: true });
  const tmp = `${binary}.${process.pid}.tmp`;
  const proc = Bun.spawn({
    cmd: [goCommand(), 'build', '-trimpath', '-o', tmp, '.'],
    cwd: SOURCE,
    env: { ...process.env, GOTOOLCHAIN: 'local', GOPROXY: 'off', GOFLAGS: '', CGO_ENABLED: '0' },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  if (code !== 0) throw new Error(`go build of ${SOURCE} failed (exit ${code}): ${stderr.trim()}`);
  renameSync(tmp, binary);
  return binary;
}

/** Go's verdict on each request, in one run of the reader. */
export async function readWithGo(binary: string, inputs: readonly CsrInput[]): Promise<Map<string, GoVerdict>> {
  const lines = inputs.map((i) => JSON.stringify({ id: i.id, request: Buffer.from(i.request).toString('base64'), usages: i.usages })).join('\n');
  const proc = Bun.spawn({ cmd: [binary], stdin: new Blob([`${lines}\n`]), stdout: 'pipe', stderr: 'pipe' });
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  if (code !== 0) throw new Error(`${binary} failed (exit ${code}): ${stderr.trim()}`);
  const out = new Map<string, GoVerdict>();
  for (const line of stdout.split('\n')) {
    if (!line) continue;
    const verdict = JSON.parse(line) as GoVerdict;
    out.set(verdict.id, verdict);
  }
  if (out.size !== inputs.length) throw new Error(`${binary} answered ${out.size} of ${inputs.length} requests`);
  return out;
}
