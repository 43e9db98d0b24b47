import { beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { runToEnd } from '../harness/run-to-end.ts';

/**
 * The real kube-apiserver selects h2, as it does for client-go: twenty requests at once from
 * edge-ccm's transport share one connection; with client-go's DISABLE_HTTP2 switch set they
 * take HTTP/1.1 connections of their own. Counted on the wire, by the client process's sockets.
 */
const CLIENT = join(import.meta.dir, '..', 'fakes', 'api-connections-main.ts');
let cp: ControlPlane;

beforeAll(async () => {
  cp = await sharedControlPlane();
}, 240_000);

async function connectionsFor(disableHttp2: string | undefined): Promise<{ connections: number; protocol: { version: string; reason: string } }> {
  const run = await runToEnd([process.execPath, CLIENT, cp.adminKubeconfig, '20'], { timeoutMs: 30_000, env: { DISABLE_HTTP2: disableHttp2 } });
  if (run.exitCode !== 0) throw new Error(`api-connections-main exited ${run.exitCode}: ${run.output}`);
  return JSON.parse(run.stdout.trim());
}

test('twenty requests at once share one HTTP/2 connection to the API server', async () => {
  const h2 = await connectionsFor(undefined);
  expect(h2).toEqual({ connections: 1, protocol: { version: 'http2', reason: 'default' } });
});

test('with DISABLE_HTTP2 set they go over HTTP/1.1, on connections of their own', async () => {
  const h1 = await connectionsFor('1');
  expect(h1.protocol).toEqual({ version: 'http1.1', reason: 'DISABLE_HTTP2' });
  expect(h1.connections).toBeGreaterThan(1);
});
