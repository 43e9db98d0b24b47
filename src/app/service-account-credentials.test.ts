import { afterEach, expect, test } from 'bun:test';
import { KubeConfig } from '@kubernetes/client-node';
import { ServiceAccountCredentials } from './service-account-credentials.ts';
import { KubeApiError } from '../kube/errors.ts';
import type { KubeRequest, KubeTransport, WatchEvent } from '../kube/transport.ts';
import { silentLogger } from '../log.ts';
import { eventually } from '../../test/harness/eventually.ts';

/** The root identity's API: service accounts exist; token requests answer from a script. */
class TokenApi implements KubeTransport {
  readonly server = 'https://127.0.0.1:1';
  readonly tokenRequests: number[] = [];
  constructor(private readonly answers: (() => { token: string; lifetimeMs: number } | Error)[]) {}

  async request<T>(req: KubeRequest): Promise<T> {
    if (req.method === 'GET') return {} as T;
    const answer = this.answers[this.tokenRequests.length] ?? this.answers.at(-1)!;
    this.tokenRequests.push(performance.now());
    const a = answer();
    if (a instanceof Error) throw a;
    return { status: { token: a.token, expirationTimestamp: new Date(Date.now() + a.lifetimeMs).toISOString() } } as T;
  }

  // eslint-disable-next-line require-yield
  async *watch<T>(): AsyncGenerator<WatchEvent<T>> {
    throw new Error('not used');
  }
}

const stop = new AbortController();
afterEach(() => stop.abort());

function base(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({ clusters: [{ name: 'c', server: 'https://127.0.0.1:1', skipTLSVerify: true }], users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
  return kc;
}

test('renewal follows the granted lifetime, and a failed renewal is retried soon, not a whole period later', async () => {
  const api = new TokenApi([
    () => ({ token: 't1', lifetimeMs: 1_000 }), // renewed at 80%: after 0.8 s
    () => new KubeApiError(503, 'ServiceUnavailable', 'etcd leader changed', 'POST', '/token'),
    () => ({ token: 't2', lifetimeMs: 3_600_000 }),
  ]);
  const credentials = new ServiceAccountCredentials(base(), api, { qps: 0 }, silentLogger, stop.signal, { initialMs: 50, maxMs: 100 });
  await credentials.transportFor('node-controller');
  expect(api.tokenRequests).toHaveLength(1);
  // Before this fix a failure waited the full 48-minute period, past the token's expiry.
  await eventually('the renewal retried after its failure', () => api.tokenRequests.length >= 3, 10_000);
  const [first, failed, retried] = api.tokenRequests as [number, number, number];
  expect(failed - first).toBeGreaterThanOrEqual(700); // not before 80% of the 1 s lifetime (timer slack aside)
  expect(retried - failed).toBeGreaterThanOrEqual(40); // after the retry delay
  // t2 lives an hour: no further request for now.
  await Bun.sleep(200);
  expect(api.tokenRequests).toHaveLength(3);
});
