import { describe, expect, test } from 'bun:test';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { Store, objectKey } from './store.ts';

function cm(name: string, rv: string, owner?: string, namespace = 'ns'): V1ConfigMap {
  return { metadata: { name, namespace, resourceVersion: rv, labels: owner ? { owner } : {} } };
}
const byOwner = (obj: V1ConfigMap) => (obj.metadata?.labels?.owner ? [obj.metadata.labels.owner] : []);
const names = (objs: V1ConfigMap[]) => objs.map((o) => o.metadata?.name).sort();

describe('objectKey', () => {
  test('namespace/name for namespaced objects, name for cluster-scoped ones', () => {
    expect(objectKey({ metadata: { name: 'a', namespace: 'kube-system' } })).toBe('kube-system/a');
    expect(objectKey({ metadata: { name: 'node-1' } })).toBe('node-1');
  });
  test('an object without a name cannot be keyed', () => {
    expect(() => objectKey({ metadata: {} })).toThrow(/metadata.name/);
  });
});

describe('Store', () => {
  test('upsert and delete report what changed and keep get/list/keys/size current', () => {
    const store = new Store<V1ConfigMap>();
    expect(store.upsert(cm('a', '1'))).toEqual({ type: 'add', obj: cm('a', '1') });
    expect(store.upsert(cm('b', '2'))).toEqual({ type: 'add', obj: cm('b', '2') });
    expect(store.upsert(cm('a', '3'))).toEqual({ type: 'update', oldObj: cm('a', '1'), obj: cm('a', '3') });
    expect(store.size).toBe(2);
    expect(store.keys().sort()).toEqual(['ns/a', 'ns/b']);
    expect(store.get('ns/a')?.metadata?.resourceVersion).toBe('3');
    expect(store.delete(cm('a', '4'))).toEqual({ type: 'delete', obj: cm('a', '4') });
    expect(store.delete(cm('a', '4'))).toBeUndefined();
    expect(store.get('ns/a')).toBeUndefined();
    expect(names(store.list())).toEqual(['b']);
  });

  test('list gives a new array each call: a caller may filter it in place (the lifecycle pass does) without changing the store', () => {
    const store = new Store<V1ConfigMap>();
    store.upsert(cm('a', '1'));
    store.upsert(cm('b', '2'));
    const first = store.list();
    first.length = 0;
    expect(names(store.list()).sort()).toEqual(['a', 'b']);
    expect(store.list()).not.toBe(store.list());
  });

  test('indexes follow adds, updates, deletes and replaces, and index existing objects when added', () => {
    const store = new Store<V1ConfigMap>();
    store.upsert(cm('a', '1', 'x'));
    store.addIndexer('owner', byOwner);
    expect(names(store.byIndex('owner', 'x'))).toEqual(['a']);

    store.upsert(cm('b', '2', 'x'));
    expect(names(store.byIndex('owner', 'x'))).toEqual(['a', 'b']);
    store.upsert(cm('a', '3', 'y')); // moves from x to y
    expect(names(store.byIndex('owner', 'x'))).toEqual(['b']);
    expect(names(store.byIndex('owner', 'y'))).toEqual(['a']);
    store.delete(cm('b', '4'));
    expect(store.byIndex('owner', 'x')).toEqual([]);

    store.replace([cm('c', '5', 'y'), cm('d', '6', 'z')]);
    expect(names(store.byIndex('owner', 'y'))).toEqual(['c']);
    expect(names(store.byIndex('owner', 'z'))).toEqual(['d']);
    expect(() => store.byIndex('nope', 'x')).toThrow(/no index/);
    expect(() => store.addIndexer('owner', byOwner)).toThrow(/already exists/);
  });

  test('replace returns the difference, deletes carrying the last known object', () => {
    const store = new Store<V1ConfigMap>();
    store.replace([cm('kept', '1'), cm('changed', '2'), cm('gone', '3')]);
    const changes = store.replace([cm('kept', '1'), cm('changed', '7'), cm('new', '8')]);
    expect(changes).toEqual([
      { type: 'update', oldObj: cm('kept', '1'), obj: cm('kept', '1') },
      { type: 'update', oldObj: cm('changed', '2'), obj: cm('changed', '7') },
      { type: 'add', obj: cm('new', '8') },
      { type: 'delete', obj: cm('gone', '3') },
    ]);
    expect(store.keys().sort()).toEqual(['ns/changed', 'ns/kept', 'ns/new']);
  });
});
