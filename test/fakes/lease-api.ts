import { KubeApiError } from '../../src/kube/errors.ts';
import type { Lease } from '../../src/kube/leader-election.ts';
import type { KubeRequest, KubeTransport, WatchEvent } from '../../src/kube/transport.ts';

const LEASE_PATH = /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/([^/]+)\/leases(?:\/([^/]+))?$/;

/** Leases in memory with the API server's optimistic concurrency: a PUT with a stale resourceVersion gets 409. */
export class FakeLeaseApi implements KubeTransport {
  readonly server = 'https://fake.invalid';
  readonly leases = new Map<string, Lease>();
  readonly requests: string[] = [];
  /** When set, every request fails without an answer, like a network outage. */
  unreachable = false;
  /** Runs once just before the next PUT is applied (to let a rival write first). */
  beforeNextPut?: () => void;
  private version = 0;

  async request<T>(req: KubeRequest): Promise<T> {
    if (req.signal?.aborted) throw req.signal.reason;
    if (this.unreachable) throw new TypeError('connect ECONNREFUSED');
    const m = LEASE_PATH.exec(req.path);
    if (!m) throw new Error(`unexpected path ${req.path}`);
    const [, namespace, name] = m;
    this.requests.push(`${req.method} ${name ?? ''}`);
    const body = req.body as Lease | undefined;
    const key = `${namespace}/${name ?? body?.metadata?.name}`;
    const stored = this.leases.get(key);
    const fail = (status: number, reason: string) => new KubeApiError(status, reason, reason, req.method, req.path);
    switch (req.method) {
      case 'GET':
        if (!stored) throw fail(404, 'NotFound');
        return structuredClone(stored) as T;
      case 'POST':
        if (stored) throw fail(409, 'AlreadyExists');
        return this.store(key, body!) as T;
      case 'PUT': {
        const hook = this.beforeNextPut;
        this.beforeNextPut = undefined;
        hook?.();
        const current = this.leases.get(key);
        if (!current) throw fail(404, 'NotFound');
        if (body?.metadata?.resourceVersion !== current.metadata?.resourceVersion) throw fail(409, 'Conflict');
        return this.store(key, body!) as T;
      }
      default:
        throw new Error(`unexpected method ${req.method}`);
    }
  }

  async *watch<T>(): AsyncGenerator<WatchEvent<T>> {
    throw new Error('not used');
  }

  /** What another writer would do: replace the spec, bumping the resourceVersion. */
  rivalWrite(key: string, spec: Lease['spec']): void {
    const current = this.leases.get(key)!;
    this.store(key, { ...current, spec });
  }

  spec(key = 'kube-system/ccm') {
    return this.leases.get(key)?.spec;
  }

  private store(key: string, obj: Lease): Lease {
    const saved = structuredClone({ ...obj, metadata: { ...obj.metadata, uid: obj.metadata?.uid ?? 'uid-1', resourceVersion: String(++this.version) } });
    this.leases.set(key, saved);
    return structuredClone(saved);
  }
}
