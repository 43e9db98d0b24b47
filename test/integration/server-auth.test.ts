import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { KubeConfig } from '@kubernetes/client-node';
import { Counter, Registry } from 'prom-client';
import { isNotFound } from '../../src/kube/errors.ts';
import { BunKubeTransport, type KubeTransport } from '../../src/kube/transport.ts';
import { createLogger } from '../../src/log.ts';
import { delegatingAuth } from '../../src/server/auth/delegating.ts';
import { HealthChecks } from '../../src/server/health.ts';
import { createServer, type CcmServer } from '../../src/server/server.ts';
import { type ControlPlane, sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';

/**
 * The serving side's delegated authentication and authorization against a real kube-apiserver:
 * TokenReview for static tokens and service-account tokens, SubjectAccessReview through RBAC.
 */

let cp: ControlPlane;
let api: KubeTransport;
let server: CcmServer;
let baseUrl: string;
let caPem: string;
const logLines: string[] = [];
const tokensUsed: string[] = [];
const suffix = crypto.randomUUID().slice(0, 8);
const metricsReaderRole = `edge-ccm-test-metrics-reader-${suffix}`;
const scraperName = `edge-ccm-test-scraper-${suffix}`;

function tokenOf(kubeconfigPath: string): string {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const token = kc.getCurrentUser()?.token;
  if (!token) throw new Error(`no token in ${kubeconfigPath}`);
  return token;
}

function get(path: string, token?: string): Promise<Response> {
  return fetch(baseUrl + path, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
    tls: { ca: caPem },
  });
}

async function deleteIgnoringMissing(path: string): Promise<void> {
  try {
    await api.request({ method: 'DELETE', path });
  } catch (e) {
    if (!isNotFound(e)) throw e;
  }
}

beforeAll(async () => {
  cp = await sharedControlPlane();
  const kc = new KubeConfig();
  kc.loadFromFile(cp.adminKubeconfig);
  api = new BunKubeTransport(kc, { qps: 0 });

  const registry = new Registry();
  new Counter({ name: 'edge_ccm_integration_probe_total', help: 'proves the registry is served', registers: [registry] }).inc();
  const checks = new HealthChecks();
  checks.add('ping', () => {});
  server = createServer({
    bindAddress: '127.0.0.1',
    securePort: 10258,
    ephemeralPortForTests: true,
    registry,
    checks,
    // Denials are kept 1s instead of 10s, so the RBAC grant below shows without a long wait.
    ...delegatingAuth(api, { denyTtlMs: 1_000 }),
    logger: createLogger({ verbosity: 10, write: (l) => logLines.push(l) }),
  });
  const started = await server.start();
  baseUrl = `https://localhost:${started.port}`;
  caPem = started.selfSignedCaPem!;
}, 200_000);

afterAll(async () => {
  await server?.stop();
  if (api) {
    await deleteIgnoringMissing(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${metricsReaderRole}`);
    await deleteIgnoringMissing(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${metricsReaderRole}`);
    await deleteIgnoringMissing(`/api/v1/namespaces/default/serviceaccounts/${scraperName}`);
  }
  // The shared control plane is stopped by its owner at process exit.
});

describe('delegated auth against kube-apiserver', () => {
  test('/metrics with a system:masters token: 200 and the registry', async () => {
    const res = await get('/metrics', tokenOf(cp.tokenKubeconfig('admin')));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toStartWith('text/plain; version=0.0.4');
    expect(await res.text()).toContain('edge_ccm_integration_probe_total 1');
  });

  test('/metrics with a token of a user without rights: 403 naming the user', async () => {
    const res = await get('/metrics', tokenOf(cp.tokenKubeconfig('viewer')));
    expect(res.status).toBe(403);
    const body = (await res.json()) as { kind: string; reason: string; message: string };
    expect(body.kind).toBe('Status');
    expect(body.reason).toBe('Forbidden');
    expect(body.message).toStartWith('forbidden: User "token-viewer" cannot get path "/metrics"');
  });

  test('/metrics without a token, or with one the API server does not know: 401', async () => {
    expect((await get('/metrics')).status).toBe(401);
    expect((await get('/metrics', `not-a-real-token-${suffix}`)).status).toBe(401);
  });

  test('/healthz, /readyz and /livez without a token: 200', async () => {
    for (const path of ['/healthz', '/readyz', '/livez']) {
      const res = await get(path);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('ok');
    }
  });

  test('a service account is let in once RBAC grants it get on /metrics', async () => {
    const token = await cp.serviceAccountToken('default', scraperName);
    tokensUsed.push(token);
    expect((await get('/metrics', token)).status).toBe(403);

    await api.request({
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      body: {
        apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: metricsReaderRole },
        rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }],
      },
    });
    await api.request({
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      body: {
        apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: metricsReaderRole },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: metricsReaderRole },
        subjects: [{ kind: 'ServiceAccount', name: scraperName, namespace: 'default' }],
      },
    });
    // The denial is cached and RBAC takes a moment to apply: poll rather than guess.
    await eventually('/metrics to answer 200 once the grant applies', async () => (await get('/metrics', token)).status === 200, 60_000, 500);
  }, 90_000);

  test('no token appears in the log', async () => {
    // Its own requests with every kind of token, so it holds whichever tests ran before it.
    const tokens = [tokenOf(cp.tokenKubeconfig('admin')), tokenOf(cp.tokenKubeconfig('viewer')), await cp.serviceAccountToken('default', scraperName), `not-a-real-token-${suffix}`];
    for (const token of tokens) await get('/metrics', token);
    tokens.push(...tokensUsed);
    expect(logLines.length).toBeGreaterThan(0);
    for (const line of logLines) for (const t of tokens) expect(line).not.toContain(t);
  });
});
