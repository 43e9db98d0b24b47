import { KubeConfig } from '@kubernetes/client-node';
import type { Server } from 'bun';
import { BunKubeTransport, type TransportOptions } from '../../src/kube/transport.ts';

/**
 * A local HTTP endpoint standing in for a slow API server (not an imitation of the API: it answers
 * what the test's handler says), and a BunKubeTransport to it. A handler can stall an answer
 * (stall()); close() releases every stalled answer and stops the server: call it after each test.
 */
export class StallingPeer {
  private server?: Server<undefined>;
  private readonly stalls: (() => void)[] = [];

  /** A transport (no client-side rate limit) to a server answering with `handler`. */
  transport(handler: (req: Request) => Response | Promise<Response>, options: TransportOptions = {}): BunKubeTransport {
    this.server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: handler });
    const kc = new KubeConfig();
    kc.loadFromOptions({ clusters: [{ name: 'c', server: `http://127.0.0.1:${this.server.port}`, skipTLSVerify: true }], users: [{ name: 'u' }], contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
    return new BunKubeTransport(kc, { qps: 0, ...options });
  }

  /** An answer that never comes: it fails when close() releases it. */
  stall(): Promise<never> {
    return new Promise((_, reject) => this.stalls.push(() => reject(new Error('released'))));
  }

  close(): void {
    for (const release of this.stalls.splice(0)) release();
    this.server?.stop(true);
    this.server = undefined;
  }
}
