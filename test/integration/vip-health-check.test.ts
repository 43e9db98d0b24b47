import { afterAll, beforeAll, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadVipConfig } from '../../src/announce/vip/config.ts';
import type { HealthRequest } from '../../src/announce/vip/health-connection.ts';
import { checkStatus, closeHealthChecks } from '../harness/health-check.ts';
import { tempDir } from '../harness/ccm-process.ts';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { removeOwnedDir } from '../harness/processes.ts';

/**
 * edge-ccm vip's health check against a real kube-apiserver run with --anonymous-auth=false, as
 * k3s, RKE2 and Talos run it: the anonymous check gets 401 (the VIP would never come up); a client
 * certificate made by deploy/systemd/vip-health-cert.sh (docs/install.md's k3s and RKE2 guides),
 * or a service account's token, gets 200 from /readyz, and that identity may read nothing else.
 * The files go through loadVipConfig as `edge-ccm vip` reads them, the certificate verified.
 */
const ROOT = resolve(import.meta.dir, '../..');

let cp: ControlPlane;
let dir: string;

beforeAll(async () => {
  cp = await startControlPlane({ extraApiServerFlags: ['--anonymous-auth=false'] });
  dir = tempDir('edge-ccm-vip-health-');
}, 240_000);

afterAll(async () => {
  closeHealthChecks();
  await cp?.stop();
  if (dir) removeOwnedDir(dir);
});

/** What `edge-ccm vip` would check with, from a controlPlaneEndpoint section naming these healthCheck files. */
function healthRequest(healthCheck: string[]): HealthRequest {
  const text = [
    'controlPlaneEndpoint:',
    '  addresses: [203.0.113.90]',
    '  announce: l2',
    `  healthURL: ${cp.server}/readyz`,
    '  healthCheck:',
    ...healthCheck.map((line) => `    ${line}`),
    '  hosts: [{ name: cp1, address: 198.51.100.91 }]',
    '',
  ].join('\n');
  const r = loadVipConfig(text);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.config.healthRequest;
}

test('anonymous: 401 (what an anonymous check gets from k3s, RKE2 and Talos)', async () => {
  expect(await checkStatus(`${cp.server}/readyz`, 5000)).toBe('401');
});

test("vip-health-cert.sh's certificate (no group, the cluster's client CA): /readyz 200, the certificate verified; nothing else readable", async () => {
  const caKey = cp.caFile.replace(/\.crt$/, '.key');
  const made = Bun.spawnSync(['sh', join(ROOT, 'deploy/systemd/vip-health-cert.sh'), cp.caFile, caKey, dir, '30'], { stderr: 'pipe', stdout: 'pipe' });
  expect({ code: made.exitCode, stderr: made.stderr.toString() }).toEqual({ code: 0, stderr: '' });
  const request = healthRequest([`caFile: ${cp.caFile}`, `clientCertificateFile: ${join(dir, 'health.crt')}`, `clientKeyFile: ${join(dir, 'health.key')}`]);
  expect(request.tls.rejectUnauthorized).toBe(true);
  expect(await checkStatus(`${cp.server}/readyz`, 5000, request)).toBe('200');
  // Authenticated as edge-ccm-vip, allowed only what every authenticated user is.
  const other = await fetch(`${cp.server}/api/v1/namespaces/kube-system/secrets`, { tls: request.tls } as RequestInit);
  expect(other.status).toBe(403);
  expect(await other.text()).toContain('User \\"edge-ccm-vip\\" cannot list resource \\"secrets\\"');
});

test("a service account's token (tokenFile, verified): 200", async () => {
  const tokenFile = join(dir, 'health-token');
  writeFileSync(tokenFile, `${await cp.serviceAccountToken('kube-system', 'edge-ccm-vip-health')}\n`, { mode: 0o600 });
  expect(await checkStatus(`${cp.server}/readyz`, 5000, healthRequest([`caFile: ${cp.caFile}`, `tokenFile: ${tokenFile}`]))).toBe('200');
});
