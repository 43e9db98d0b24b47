import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { V1ConfigMap, V1Node, V1SelfSubjectReview } from '@kubernetes/client-node';
import { KubeApiError, isForbidden } from '../../src/kube/errors.ts';
import { CONFIGMAPS, FIELD_MANAGER, NODES, ResourceClient } from '../../src/kube/resources.ts';
import type { KubeTransport, WatchEvent } from '../../src/kube/transport.ts';
import { controlPlaneBinDir, controlPlaneVersions, missingBinaryMessage } from '../harness/binaries.ts';
import { createCertificateAuthority, issueCertificate } from '../harness/certs.ts';
import { type ControlPlane, sharedControlPlane, startControlPlane } from '../harness/control-plane.ts';
import { transportFor, writeKubeconfig } from '../harness/kubeconfig.ts';
import { eventually } from '../harness/eventually.ts';

// A private control plane: these tests restart the API server and compact etcd, which would
// disturb other files sharing sharedControlPlane().
let cp: ControlPlane;
let admin: KubeTransport;
let configMaps: ResourceClient<V1ConfigMap>;
const NS = 'default';

beforeAll(async () => {
  const started = performance.now();
  cp = await startControlPlane();
  console.error(`[harness.test] control plane ready in ${Math.round(performance.now() - started)} ms at ${cp.server}`);
  admin = transportFor(cp.adminKubeconfig);
  configMaps = new ResourceClient<V1ConfigMap>(admin, CONFIGMAPS);
}, 200_000);

afterAll(async () => {
  await cp?.stop();
});

async function whoAmI(api: KubeTransport): Promise<{ username?: string; groups?: string[] }> {
  const review = await api.request<V1SelfSubjectReview>({
    method: 'POST',
    path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
  });
  return review.status?.userInfo ?? {};
}

async function statusOf(promise: Promise<unknown>): Promise<number | 'ok'> {
  try {
    await promise;
    return 'ok';
  } catch (e) {
    if (e instanceof KubeApiError) return e.status;
    throw e;
  }
}

/** The pinned kube-apiserver release, as scripts/build-control-plane.sh stamps it. */
function expectedVersion(): { major: string; minor: string; gitVersion: string } {
  const { k8s } = controlPlaneVersions();
  const [major = '', minor = ''] = k8s.replace(/^v/, '').split('.');
  return { major, minor, gitVersion: k8s };
}

function listNodes(api: KubeTransport) {
  return new ResourceClient<V1Node>(api, NODES).list();
}

/** Collects watch events until `done` says so; the watch is aborted either way. */
async function collectWatch<T>(api: KubeTransport, path: string, resourceVersion: string, done: (events: WatchEvent<T>[]) => boolean, act?: () => Promise<void>): Promise<WatchEvent<T>[]> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new Error('watch timed out')), 30_000);
  const events: WatchEvent<T>[] = [];
  try {
    const stream = api.watch<T>(path, { resourceVersion, allowWatchBookmarks: false }, abort.signal);
    // The first next() sends the request; act only once the watch is open, else its events could predate it.
    const first = stream.next();
    const acted = act?.();
    for (let r = await first; !r.done; r = await stream.next()) {
      events.push(r.value);
      if (done(events)) break;
    }
    await acted;
    if (abort.signal.aborted) throw abort.signal.reason;
    return events;
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}

describe('authentication', () => {
  test('mutual TLS: the admin client certificate lists nodes', async () => {
    const nodes = await listNodes(admin);
    expect(Array.isArray(nodes.items)).toBe(true);
    expect(await whoAmI(admin)).toMatchObject({ username: 'admin', groups: expect.arrayContaining(['system:masters']) });
  });

  test('a client certificate signed by another CA gets 401', async () => {
    const dir = join(cp.dir, 'foreign-pki');
    await mkdir(dir, { recursive: true });
    const foreignCa = await createCertificateAuthority(dir, 'foreign-ca', 'not-the-cluster-ca');
    const cert = await issueCertificate(foreignCa, dir, 'intruder', { commonName: 'admin', organizations: ['system:masters'], usage: 'client' });
    const kubeconfig = await writeKubeconfig(join(dir, 'intruder.yaml'), cp.server, cp.caPem, 'intruder', { clientCertPem: cert.certPem, clientKeyPem: cert.keyPem });
    expect(await statusOf(listNodes(transportFor(kubeconfig)))).toBe(401);
  });

  test('clientCertKubeconfig maps CN to the user and O to groups', async () => {
    const api = transportFor(await cp.clientCertKubeconfig('alice', ['dev-team', 'on-call']));
    expect(await whoAmI(api)).toMatchObject({ username: 'alice', groups: expect.arrayContaining(['dev-team', 'on-call']) });
    expect(await statusOf(listNodes(api))).toBe(403); // authenticated, but no RBAC grant
  });

  test('static tokens: the viewer is forbidden to list nodes, the admin token may', async () => {
    const viewer = transportFor(cp.tokenKubeconfig('viewer'));
    const err = await listNodes(viewer).catch((e: unknown) => e);
    expect(isForbidden(err)).toBe(true);
    expect((await whoAmI(viewer)).username).toBe('token-viewer');

    const tokenAdmin = transportFor(cp.tokenKubeconfig());
    expect(Array.isArray((await listNodes(tokenAdmin)).items)).toBe(true);
    expect(await whoAmI(tokenAdmin)).toMatchObject({ username: 'token-user', groups: expect.arrayContaining(['system:masters']) });
  });

  test('a service-account token from the TokenRequest API authenticates as that service account', async () => {
    const token = await cp.serviceAccountToken('harness-sa', 'robot');
    const api = transportFor(await writeKubeconfig(join(cp.dir, 'sa-robot.yaml'), cp.server, cp.caPem, 'robot', { token }));
    expect(await api.request({ method: 'GET', path: '/version' })).toMatchObject(expectedVersion());
    expect(await whoAmI(api)).toMatchObject({
      username: 'system:serviceaccount:harness-sa:robot',
      groups: expect.arrayContaining(['system:serviceaccounts', 'system:serviceaccounts:harness-sa']),
    });
    // Asking again for the same account is fine (the account already exists).
    expect(await cp.serviceAccountToken('harness-sa', 'robot')).toBeString();
  });

  test('a forged bearer token gets 401', async () => {
    const api = transportFor(await writeKubeconfig(join(cp.dir, 'forged.yaml'), cp.server, cp.caPem, 'forged', { token: 'not-a-real-token' }));
    expect(await statusOf(whoAmI(api))).toBe(401);
  });
});

describe('ConfigMap round trip through ResourceClient', () => {
  test('create, get, list, merge patch, strategic merge patch, server-side apply, JSON patch', async () => {
    const created = await configMaps.create({ metadata: { name: 'round-trip', namespace: NS }, data: { a: '1' } });
    expect(created.metadata?.uid).toBeString();
    expect((await configMaps.get('round-trip', { namespace: NS })).data).toEqual({ a: '1' });
    const list = await configMaps.list({ namespace: NS });
    expect(list.items.map((c) => c.metadata?.name)).toContain('round-trip');
    expect(list.metadata.resourceVersion).toBeString();

    const merged = await configMaps.patch('round-trip', 'merge', { data: { b: '2' } }, { namespace: NS });
    expect(merged.data).toEqual({ a: '1', b: '2' });

    const strategic = await configMaps.patch('round-trip', 'strategic', { metadata: { labels: { tier: 'test' } }, data: { a: null } }, { namespace: NS });
    expect(strategic.data).toEqual({ b: '2' });
    expect(strategic.metadata?.labels).toEqual({ tier: 'test' });

    const applied = await configMaps.patch('round-trip', 'apply', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'round-trip' }, data: { c: '3' } }, { namespace: NS });
    expect(applied.data).toEqual({ b: '2', c: '3' });
    expect(applied.metadata?.managedFields?.some((f) => f.manager === FIELD_MANAGER && f.operation === 'Apply')).toBe(true);

    const jsonPatched = await configMaps.patch('round-trip', 'json', [
      { op: 'test', path: '/data/b', value: '2' },
      { op: 'replace', path: '/data/b', value: 'two' },
    ], { namespace: NS });
    expect(jsonPatched.data).toEqual({ b: 'two', c: '3' });

    // A failing JSON-patch test op proves the patch is really evaluated server side.
    expect(await statusOf(configMaps.patch('round-trip', 'json', [{ op: 'test', path: '/data/b', value: '2' }], { namespace: NS }))).toBe(422);
  });
});

describe('watch', () => {
  test('sees ADDED then MODIFIED for an object', async () => {
    const from = (await configMaps.list({ namespace: NS })).metadata.resourceVersion ?? '';
    const events = await collectWatch<V1ConfigMap>(admin, configMaps.collectionPath(NS), from,
      (seen) => seen.filter((e) => e.object.metadata?.name === 'watched').length >= 2,
      async () => {
        await configMaps.create({ metadata: { name: 'watched', namespace: NS }, data: { v: '1' } });
        await configMaps.patch('watched', 'merge', { data: { v: '2' } }, { namespace: NS });
      });
    const mine = events.filter((e) => e.object.metadata?.name === 'watched');
    expect(mine.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED']);
    expect(mine[1]?.object.data).toEqual({ v: '2' });
  });
});

describe('control-plane operations', () => {
  test('restartApiServer keeps the data in etcd', async () => {
    await configMaps.create({ metadata: { name: 'survivor', namespace: NS }, data: { kept: 'yes' } });
    await cp.restartApiServer();
    // The same transport as before: its pooled connection died with the old process.
    expect((await configMaps.get('survivor', { namespace: NS })).data).toEqual({ kept: 'yes' });
  }, 200_000);

  test('stopApiServer refuses connections until startApiServer', async () => {
    await cp.stopApiServer();
    const fresh = transportFor(cp.adminKubeconfig);
    await expect(fresh.request({ method: 'GET', path: '/version' })).rejects.toThrow();
    await cp.startApiServer();
    expect(await fresh.request({ method: 'GET', path: '/version' })).toMatchObject(expectedVersion());
  }, 200_000);

  test('compactEtcd makes a watch from an old resourceVersion fail with 410 Gone', async () => {
    const created = await configMaps.create({ metadata: { name: 'compacted', namespace: NS }, data: { n: '0' } });
    const oldVersion = created.metadata?.resourceVersion ?? '';
    for (let n = 1; n <= 3; n++) await configMaps.patch('compacted', 'merge', { data: { n: String(n) } }, { namespace: NS });
    // Before: the old version is still watchable, and replays the three changes.
    const replayed = await collectWatch<V1ConfigMap>(admin, configMaps.collectionPath(NS), oldVersion,
      (seen) => seen.filter((e) => e.object.metadata?.name === 'compacted').length >= 3);
    expect(replayed.filter((e) => e.object.metadata?.name === 'compacted').map((e) => e.object.data?.n)).toEqual(['1', '2', '3']);

    await cp.compactEtcd();

    // The server may refuse the watch outright or open it and send an ERROR event: both are 410.
    let status: number | undefined;
    try {
      const events = await collectWatch<{ code?: number }>(admin, configMaps.collectionPath(NS), oldVersion, (seen) => seen.some((e) => e.type === 'ERROR'));
      status = events.find((e) => e.type === 'ERROR')?.object.code;
    } catch (e) {
      if (!(e instanceof KubeApiError)) throw e;
      status = e.status;
    }
    expect(status).toBe(410);
    // The data itself is untouched.
    expect((await configMaps.get('compacted', { namespace: NS })).data).toEqual({ n: '3' });
  }, 200_000);

  test('the audit log records requests at Metadata level', async () => {
    await configMaps.create({ metadata: { name: 'audited', namespace: NS } });
    let entries: { level?: string; verb?: string; user?: { username?: string }; objectRef?: { resource?: string; name?: string } }[] = [];
    await eventually('the create in the audit log', async () => {
      const text = await readFile(cp.auditLogPath, 'utf8').catch(() => '');
      entries = text.split('\n').filter(Boolean).map((line) => JSON.parse(line));
      return entries.some((e) => e.objectRef?.name === 'audited');
    }, 5_000, 100).catch(() => undefined); // the expectations below say what is missing
    expect(entries.length).toBeGreaterThan(0);
    expect(entries.find((e) => e.verb === 'create' && e.objectRef?.resource === 'configmaps' && e.objectRef?.name === 'audited'))
      .toMatchObject({ level: 'Metadata', user: { username: 'admin' } });
  });
});

/** Pids of live processes whose command line mentions `text` (the control plane's temp dir). */
function pidsMentioning(text: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(text)) pids.push(Number(entry));
    } catch {
      // exited while we looked
    }
  }
  return pids;
}

describe('cleanup when the test process ends', () => {
  const fixture = join(import.meta.dir, '../harness/exit-cleanup-fixture.ts');

  /** Starts the fixture, which starts the shared control plane and prints its dir. */
  async function startFixture(mode: 'end' | 'wait') {
    // Killed by Bun at the latest when the test would time out, so a stuck fixture never outlives it.
    const child = Bun.spawn({ cmd: [process.execPath, fixture, mode], stdout: 'pipe', stderr: 'inherit', timeout: 200_000, killSignal: 'SIGKILL' });
    const reader = child.stdout.getReader();
    let out = '';
    while (!out.includes('\n')) {
      const chunk = await reader.read();
      if (chunk.done) break;
      out += new TextDecoder().decode(chunk.value);
    }
    reader.releaseLock();
    const line = out.split('\n')[0] ?? '';
    if (!line.startsWith('{')) {
      child.kill('SIGKILL');
      throw new Error(`fixture printed no control plane: ${out}`);
    }
    return { child, dir: (JSON.parse(line) as { dir: string }).dir };
  }

  test('a script that just ends leaves no process and no temp dir', async () => {
    const { child, dir } = await startFixture('end');
    expect(await child.exited).toBe(0);
    expect(await eventually('every process and the directory gone', () => pidsMentioning(dir).length === 0 && !existsSync(dir), 15_000, 100)).toBe(true);
  }, 200_000);

  test('a SIGKILLed test process leaves no process and no temp dir (the watchdog cleans up)', async () => {
    const { child, dir } = await startFixture('wait');
    try {
      // etcd, kube-apiserver and the watchdog, all still running while their parent lives.
      expect(pidsMentioning(dir).length).toBe(3);
      expect(existsSync(dir)).toBe(true);
    } finally {
      child.kill('SIGKILL');
    }
    await child.exited;
    expect(await eventually('every process and the directory gone', () => pidsMentioning(dir).length === 0 && !existsSync(dir), 15_000, 100)).toBe(true);
  }, 200_000);
});

describe('sharedControlPlane', () => {
  test('starts one control plane and hands the same one to every caller', async () => {
    const [a, b] = await Promise.all([sharedControlPlane(), sharedControlPlane()]);
    expect(a).toBe(b);
    expect(a).not.toBe(cp);
    expect(await sharedControlPlane()).toBe(a);
    expect((await listNodes(transportFor(a.adminKubeconfig))).items).toBeArray();
  }, 200_000);
});

describe('binaries', () => {
  const saved = { ...process.env };
  // Each test starts from the environment the run had: the first one changes it.
  afterEach(() => {
    for (const key of ['EDGE_CCM_CACHE', 'XDG_CACHE_HOME', 'EDGE_CCM_K8S_VERSION', 'EDGE_CCM_ETCD_VERSION']) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
  });

  test('the bin dir follows the build script: versions from its defaults, cache root from the environment', async () => {
    const script = await readFile(join(import.meta.dir, '../../scripts/build-control-plane.sh'), 'utf8');
    const k8s = /EDGE_CCM_K8S_VERSION:-(v[\d.]+)/.exec(script)?.[1];
    const etcd = /EDGE_CCM_ETCD_VERSION:-(v[\d.]+)/.exec(script)?.[1];
    delete process.env.EDGE_CCM_K8S_VERSION;
    delete process.env.EDGE_CCM_ETCD_VERSION;
    expect(controlPlaneVersions()).toEqual({ k8s: k8s ?? 'missing', etcd: etcd ?? 'missing' });

    process.env.EDGE_CCM_CACHE = '/opt/cache';
    expect(controlPlaneBinDir()).toBe(`/opt/cache/control-plane/k8s-${k8s}-etcd-${etcd}`);
    delete process.env.EDGE_CCM_CACHE;
    process.env.XDG_CACHE_HOME = '/xdg';
    expect(controlPlaneBinDir()).toBe(`/xdg/edge-ccm/control-plane/k8s-${k8s}-etcd-${etcd}`);
    process.env.EDGE_CCM_K8S_VERSION = 'v1.99.0';
    expect(controlPlaneBinDir()).toBe(`/xdg/edge-ccm/control-plane/k8s-v1.99.0-etcd-${etcd}`);
  });

  test('a dir without the binaries gives the one-line install hint', () => {
    const dir = join(cp.dir, 'empty-bin-dir');
    expect(missingBinaryMessage(dir)).toBe(`kube-apiserver not found in ${dir}: run \`bash scripts/install.sh\` (builds it from its Go module)`);
  });

  test('a kube-apiserver of an older build recipe gives the same hint, naming why', () => {
    const dir = join(cp.dir, 'old-bin-dir');
    mkdirSync(dir);
    for (const name of ['etcd', 'kube-apiserver']) writeFileSync(join(dir, name), '');
    expect(missingBinaryMessage(dir)).toBe(`kube-apiserver in ${dir} was built by an older recipe of scripts/build-control-plane.sh: run \`bash scripts/install.sh\` (builds it from its Go module)`);
    writeFileSync(join(dir, 'kube-apiserver.recipe'), '1: the first recipe\n');
    expect(missingBinaryMessage(dir)).toContain('older recipe');
    // The real cache dir holds the current recipe: no hint.
    expect(missingBinaryMessage()).toBeUndefined();
  });
});
