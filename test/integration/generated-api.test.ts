import { afterAll, beforeAll, expect, test } from 'bun:test';
import { ApiException, CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { makeGeneratedApi } from '../../src/kube/generated-api.ts';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { transportFor } from '../harness/kubeconfig.ts';

/** client-node's generated CoreV1Api over the Bun transport, with client-certificate auth. */
const NAME = `genapi-${process.pid}`;
let api: CoreV1Api;

beforeAll(async () => {
  const cp = await sharedControlPlane();
  api = makeGeneratedApi(transportFor(await cp.clientCertKubeconfig('genapi-admin', ['system:masters'])), CoreV1Api);
}, 240_000);
afterAll(async () => {
  await api?.deleteNamespacedConfigMap({ name: NAME, namespace: 'default' }).catch(() => {});
});

test('create, read, merge-patch and list through CoreV1Api', async () => {
  const created = await api.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: NAME }, data: { a: '1' } } });
  expect(created.metadata?.uid).toBeTruthy();
  const patched = await api.patchNamespacedConfigMap(
    { name: NAME, namespace: 'default', body: { data: { b: '2' } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  expect(patched.data).toEqual({ a: '1', b: '2' });
  const list = await api.listNamespacedConfigMap({ namespace: 'default' });
  expect(list.items.map((c) => c.metadata?.name)).toContain(NAME);
});

test('API errors arrive as ApiException with the status code', async () => {
  const err = await api.readNamespacedConfigMap({ name: `${NAME}-missing`, namespace: 'default' }).then(() => undefined, (e) => e);
  expect(err).toBeInstanceOf(ApiException);
  expect((err as ApiException<unknown>).code).toBe(404);
});
