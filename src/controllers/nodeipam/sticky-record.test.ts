import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { KubeApiError } from '../../kube/errors.ts';
import type { KubeRequest, KubeTransport } from '../../kube/transport.ts';
import { ownerOfKey, readEntry, recordKey, StickyRecord } from './sticky-record.ts';

/** One ConfigMap behind a transport: GET, POST, PUT with resourceVersion checks; counts writes. */
class ConfigMapServer implements KubeTransport {
  readonly server = 'https://configmap.invalid';
  stored?: V1ConfigMap;
  writes = 0;
  private version = 0;

  async request<T>(req: KubeRequest): Promise<T> {
    await Promise.resolve(); // answers come later, as from a server
    if (req.method === 'GET') {
      if (!this.stored) throw new KubeApiError(404, 'NotFound', 'not found', req.method, req.path);
      return structuredClone(this.stored) as T;
    }
    this.writes++;
    const body = req.body as V1ConfigMap;
    if (req.method === 'POST') {
      if (this.stored) throw new KubeApiError(409, 'AlreadyExists', 'exists', req.method, req.path);
      this.stored = body;
    } else if (req.method === 'PATCH') {
      if (!this.stored) throw new KubeApiError(404, 'NotFound', 'not found', req.method, req.path);
      expect(req.contentType).toBe('application/merge-patch+json');
      const data: Record<string, string> = { ...this.stored.data };
      for (const [k, v] of Object.entries((body as { data: Record<string, string | null> }).data)) {
        if (v === null) delete data[k];
        else data[k] = v;
      }
      this.stored = { ...this.stored, data };
    } else throw new Error(`unexpected ${req.method}`);
    this.stored = { ...this.stored, metadata: { ...this.stored.metadata, resourceVersion: String(++this.version) } };
    return structuredClone(this.stored) as T;
  }

  // eslint-disable-next-line require-yield
  async *watch(): AsyncGenerator<never> {
    throw new Error('no watch here');
  }
}

describe('the record\'s keys', () => {
  test('every machine id becomes a ConfigMap key and reads back', () => {
    fc.assert(fc.property(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 80 }), (id) => {
      const key = recordKey(id);
      expect(key).toMatch(/^[-._a-zA-Z0-9]{1,253}$/);
      expect(ownerOfKey(key)).toBe(id);
    }));
    expect(recordKey('static://rack1-m7')).toBe('static_3A_2F_2Frack1-m7');
  });

  test('an id too long for a key is hashed, and the value names it', () => {
    const id = `static://${'x'.repeat(260)}`;
    const key = recordKey(id);
    expect(key).toMatch(/^sha256\.[0-9a-f]{64}$/);
    expect(readEntry(key, `10.0.0.0/24 ${id}`)).toEqual({ owner: id, cidrs: ['10.0.0.0/24'] });
    expect(readEntry('not_ZZ', '10.0.0.0/24')).toBeUndefined();
  });
});

describe('StickyRecord', () => {
  test('created on the first write; entries asked for in one turn, or during a write, go together', async () => {
    const server = new ConfigMapServer();
    const record = new StickyRecord(server, 'kube-system', 'ccm-node-ipam');
    expect((await record.load()).entries.size).toBe(0);
    await Promise.all(Array.from({ length: 10 }, (_, i) => record.write(`static://m${i}`, [`10.244.${i}.0/24`])));
    expect(server.writes).toBe(1);
    const first = record.write('static://m10', ['10.244.10.0/24']);
    await Promise.resolve();
    await Promise.resolve(); // that write is in flight now
    await Promise.all([first, ...Array.from({ length: 40 }, (_, i) => record.write(`static://m${i + 11}`, [`10.244.${i + 11}.0/24`]))]);
    expect(server.writes).toBe(3); // the 40 asked for meanwhile in one more
    expect(Object.keys(server.stored!.data!)).toHaveLength(51);
    expect(record.says('static://m7', ['10.244.7.0/24'])).toBe(true);
    expect(record.says('static://m7', ['10.244.8.0/24'])).toBe(false);
    const again = new StickyRecord(server, 'kube-system', 'ccm-node-ipam');
    expect((await again.load()).entries.get('static://m50')).toEqual(['10.244.50.0/24']);
  });

  test('a write carries only its keys: someone else\'s keys stay; an emptied machine is removed', async () => {
    const server = new ConfigMapServer();
    const record = new StickyRecord(server, 'kube-system', 'ccm-node-ipam');
    await record.load();
    await record.write('static://a', ['10.244.1.0/24']);
    server.stored = { ...server.stored!, data: { ...server.stored!.data, other: 'x' } };
    await record.write('static://b', ['10.244.2.0/24']);
    expect(server.stored.data).toEqual({ static_3A_2F_2Fa: '10.244.1.0/24', static_3A_2F_2Fb: '10.244.2.0/24', other: 'x' });
    await record.write('static://a', []);
    expect(server.stored.data).toEqual({ static_3A_2F_2Fb: '10.244.2.0/24', other: 'x' });
  });

  test('made by someone else after it was read: the create that finds it patches it', async () => {
    const server = new ConfigMapServer();
    const record = new StickyRecord(server, 'kube-system', 'ccm-node-ipam');
    await record.load();
    server.stored = { metadata: { name: 'ccm-node-ipam' }, data: { other: 'x' } };
    await record.write('static://a', ['10.244.1.0/24']);
    expect(server.stored.data).toEqual({ static_3A_2F_2Fa: '10.244.1.0/24', other: 'x' });
  });

  test('a failed write rejects its callers; the next write carries on', async () => {
    const server = new ConfigMapServer();
    const record = new StickyRecord(server, 'kube-system', 'ccm-node-ipam');
    await record.load();
    const failing = server.request.bind(server);
    server.request = async <T>(req: KubeRequest): Promise<T> => {
      if (req.method !== 'GET') throw new KubeApiError(503, 'ServiceUnavailable', 'down', req.method, req.path);
      return failing<T>(req);
    };
    await expect(record.write('static://a', ['10.244.1.0/24'])).rejects.toThrow('503');
    server.request = failing;
    await record.write('static://a', ['10.244.1.0/24']);
    expect(record.says('static://a', ['10.244.1.0/24'])).toBe(true);
  });
});
