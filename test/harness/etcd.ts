import { join } from 'node:path';
import { LoggedProcess } from './processes.ts';
import { waitUntilReady } from './wait.ts';

/** A single-member etcd on loopback, plain HTTP, data in the control plane's temp dir. */
export class EtcdServer {
  private constructor(
    readonly endpoint: string,
    private readonly proc: LoggedProcess,
  ) {}

  static async start(binary: string, dir: string, clientPort: number, peerPort: number, timeoutMs: number): Promise<EtcdServer> {
    const endpoint = `http://127.0.0.1:${clientPort}`;
    const peer = `http://127.0.0.1:${peerPort}`;
    const proc = LoggedProcess.spawn('etcd', [
      binary,
      '--name=default',
      `--data-dir=${join(dir, 'etcd-data')}`,
      `--listen-client-urls=${endpoint}`,
      `--advertise-client-urls=${endpoint}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=default=${peer}`,
      // Throwaway data: durability buys nothing and fsync is most of a write's cost.
      '--unsafe-no-fsync',
      '--log-level=warn',
    ], dir);
    const etcd = new EtcdServer(endpoint, proc);
    try {
      await waitUntilReady('etcd', proc, async () => {
        const res = await fetch(`${endpoint}/health`);
        return res.ok && ((await res.json()) as { health?: string }).health === 'true';
      }, timeoutMs);
    } catch (e) {
      await proc.kill();
      throw e;
    }
    return etcd;
  }

  get pid(): number {
    return this.proc.pid;
  }

  /**
   * Compacts to the current revision through etcd's HTTP/JSON gateway, so every older
   * resourceVersion is gone from etcd.
   */
  async compact(): Promise<void> {
    // Any range answers with the store's current revision in its header; key "\0" is cheap.
    const range = await this.gateway<{ header: { revision: string } }>('/v3/kv/range', { key: btoa('\0') });
    const revision = range.header.revision;
    try {
      await this.gateway('/v3/kv/compaction', { revision, physical: true });
    } catch (e) {
      // Already compacted to this very revision (e.g. twice in a row): nothing older is left anyway.
      if (!String(e).includes('required revision has been compacted')) throw e;
    }
  }

  private async gateway<T>(path: string, body: unknown): Promise<T> {
    const res = await fetch(this.endpoint + path, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    const text = await res.text();
    if (!res.ok) throw new Error(`etcd ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  }

  stop(): Promise<void> {
    return this.proc.kill();
  }
}
