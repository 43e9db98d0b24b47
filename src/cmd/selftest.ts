import type { KubeConfig, V1ConfigMap, V1Node } from '@kubernetes/client-node';
import { loadKubeConfig } from '../app/kubeconfig.ts';
import { EXIT_INVALID_INPUT } from '../options/exit-codes.ts';
import { BunKubeTransport } from '../kube/transport.ts';
import { CONFIGMAPS, NODES, ResourceClient } from '../kube/resources.ts';

/**
 * `edge-ccm selftest --kubeconfig FILE`: exercises the Kubernetes client through the compiled
 * binary (what users run), against a real API server: list, create, get, every patch type,
 * conflict, watch and delete. Prints one line per check; exits non-zero on the first failure.
 */
export async function runSelfTest(kubeconfigPath: string, namespace = 'default'): Promise<number> {
  let kc: KubeConfig;
  try {
    kc = loadKubeConfig({ kubeconfig: kubeconfigPath });
  } catch (e) {
    console.error(`error: ${(e as Error).message}`);
    return EXIT_INVALID_INPUT;
  }
  const transport = new BunKubeTransport(kc, { qps: 0 });
  const nodes = new ResourceClient<V1Node>(transport, NODES);
  const cms = new ResourceClient<V1ConfigMap>(transport, CONFIGMAPS);
  const name = `edge-ccm-selftest-${process.pid}-${Date.now().toString(36)}`;
  const check = async (label: string, fn: () => Promise<void>) => {
    await fn();
    console.log(`ok   ${label}`);
  };
  try {
    await check('list nodes', async () => {
      const list = await nodes.list({ query: { limit: 1 } });
      if (!Array.isArray(list.items)) throw new Error('list has no items array');
    });
    const watch = new AbortController();
    const seen: string[] = [];
    const list = await cms.list({ namespace, query: { limit: 1 } });
    const watching = (async () => {
      for await (const ev of transport.watch<V1ConfigMap>(cms.collectionPath(namespace), { resourceVersion: list.metadata.resourceVersion, fieldSelector: `metadata.name=${name}` }, watch.signal)) {
        seen.push(ev.type);
        if (ev.type === 'DELETED') break;
      }
    })();
    await check('create', async () => {
      await cms.create({ metadata: { name, namespace }, data: { a: '1' } });
    });
    await check('get', async () => {
      const got = await cms.get(name, { namespace });
      if (got.data?.a !== '1') throw new Error(`unexpected data ${JSON.stringify(got.data)}`);
    });
    await check('conflict on stale update', async () => {
      const got = await cms.get(name, { namespace });
      await cms.update({ ...got, data: { a: '2' } });
      const stale = await cms.update({ ...got, data: { a: '3' } }).then(() => 'accepted', (e) => (e as { status?: number }).status);
      if (stale !== 409) throw new Error(`stale update answered ${stale}, want 409`);
    });
    await check('merge patch', async () => {
      const got = await cms.patch(name, 'merge', { data: { b: 'merge' } }, { namespace });
      if (got.data?.b !== 'merge') throw new Error('merge patch not applied');
    });
    await check('strategic merge patch', async () => {
      const got = await cms.patch(name, 'strategic', { metadata: { labels: { s: 'y' } } }, { namespace });
      if (got.metadata?.labels?.s !== 'y') throw new Error('strategic patch not applied');
    });
    await check('json patch', async () => {
      const got = await cms.patch(name, 'json', [{ op: 'add', path: '/data/c', value: 'json' }], { namespace });
      if (got.data?.c !== 'json') throw new Error('json patch not applied');
    });
    await check('server-side apply', async () => {
      const got = await cms.patch(name, 'apply', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data: { d: 'apply' } }, { namespace });
      if (got.data?.d !== 'apply') throw new Error('apply not applied');
    });
    await check('delete', async () => {
      await cms.delete(name, { namespace });
    });
    await check('watch saw ADDED, MODIFIED and DELETED', async () => {
      const timeout = setTimeout(() => watch.abort(), 10_000);
      await watching;
      clearTimeout(timeout);
      for (const want of ['ADDED', 'MODIFIED', 'DELETED']) if (!seen.includes(want)) throw new Error(`watch saw ${seen.join(',')}`);
    });
    console.log('selftest passed');
    return 0;
  } catch (e) {
    console.log(`FAIL ${(e as Error).message}`);
    // Best effort: the object may never have been created, or already deleted.
    await cms.delete(name, { namespace }).catch(() => {});
    return 1;
  }
}
