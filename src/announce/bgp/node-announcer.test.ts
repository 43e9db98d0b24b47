import { describe, expect, test } from 'bun:test';
import { Registry } from 'prom-client';
import type { KubeRequest, KubeTransport, WatchEvent } from '../../kube/transport.ts';
import { silentLogger } from '../../log.ts';
import type { LoadBalancerConfig } from '../../lb/config-model.ts';
import { NodeBgpAnnouncer } from './node-announcer.ts';
import type { NodeBgpConfig } from './node-config.ts';

/**
 * The per-node announcer's activation: nothing watched while the file does not ask for
 * announceFrom: nodes (an L2-only cluster pays no extra watch per node); its own Node watched by
 * name once it does. The sessions themselves are test/integration/bgp-node-liveness.test.ts's.
 */

/** Answers every list with nothing and holds every watch open until aborted; records the paths. */
class RecordingTransport implements KubeTransport {
  readonly server = 'https://127.0.0.1:1';
  readonly lists: string[] = [];
  readonly watches: string[] = [];
  constructor(private readonly nodes: object[] = []) {}
  async request<T>(req: KubeRequest): Promise<T> {
    this.lists.push(`${req.path}${req.query?.fieldSelector ? `?fieldSelector=${req.query.fieldSelector}` : ''}`);
    return { items: req.path === '/api/v1/nodes' ? this.nodes : [], metadata: { resourceVersion: '1' } } as T;
  }
  async *watch<T>(path: string, _query: Record<string, unknown>, signal: AbortSignal): AsyncGenerator<WatchEvent<T>> {
    this.watches.push(path);
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  }
}

const loadBalancer: LoadBalancerConfig = { classes: [], pools: [] };
const l2Only: NodeBgpConfig = { loadBalancer };
const nodesMode: NodeBgpConfig = {
  loadBalancer,
  bgp: {
    speaker: { localAsn: 64512, routerId: '198.51.100.2', peers: [{ address: '198.51.100.1', asn: 65000 }] },
    podCIDRs: { announce: true, communities: [] },
    loadBalancers: { announceFrom: 'nodes', bfd: { desiredMinTxMs: 200, requiredMinRxMs: 200, detectMult: 3 } },
    pools: new Map(),
  },
};

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await Bun.sleep(10);
  expect(check()).toBe(true);
}

describe('node BGP announcer activation', () => {
  test('watches nothing without announceFrom: nodes; its own Node by name, Services and EndpointSlices with it; stops watching when the file stops asking', async () => {
    const transport = new RecordingTransport();
    const announcer = new NodeBgpAnnouncer({ node: 'n1', transport, config: l2Only, logger: silentLogger, bfdPort: 0 });
    const stop = new AbortController();
    const running = announcer.run(stop.signal);
    await Bun.sleep(100);
    expect(transport.lists).toEqual([]);

    announcer.setConfig(nodesMode);
    await until(() => transport.lists.length === 3);
    expect(transport.lists.sort()).toEqual(['/api/v1/nodes?fieldSelector=metadata.name=n1', '/api/v1/services', '/apis/discovery.k8s.io/v1/endpointslices']);
    // The node is not in the store (no addresses): no peer for it, so no session and no BFD.
    expect(announcer.peers()).toEqual([]);

    announcer.setConfig(l2Only);
    await Bun.sleep(100);
    const seen = transport.lists.length;
    announcer.setConfig(l2Only);
    await Bun.sleep(100);
    expect(transport.lists.length).toBe(seen);
    stop.abort();
    await running;
  });

  test('a BFD port held by another process: logged and tried again until it is free', async () => {
    // Loopback only: the node's address and the peer are 127.0.0.1 (the peer's BGP port is closed).
    const holder = await Bun.udpSocket({ hostname: '::', port: 0 });
    const node = { metadata: { name: 'n1' }, status: { addresses: [{ type: 'InternalIP', address: '127.0.0.1' }] } };
    const config: NodeBgpConfig = { ...nodesMode, bgp: { ...nodesMode.bgp!, speaker: { ...nodesMode.bgp!.speaker, peers: [{ address: '127.0.0.1', port: 9, asn: 65000, connectRetry: { minSeconds: 5, maxSeconds: 5 } }] } } };
    const errors: string[] = [];
    const logger: typeof silentLogger = Object.assign(Object.create(silentLogger), { with: () => logger, error: (m: string) => void errors.push(m) });
    const registry = new Registry();
    const announcer = new NodeBgpAnnouncer({ node: 'n1', transport: new RecordingTransport([node]), config, logger, bfdPort: holder.port, bfdPeerPort: 9, retryMs: 100, registry });
    const stop = new AbortController();
    const running = announcer.run(stop.signal);
    await until(() => errors.length >= 2);
    expect(errors[0]).toBe('cannot apply the node BGP sessions; retrying in 0.1 s');
    expect(announcer.peers()).toEqual([]);
    holder.close();
    await until(() => announcer.peers().length === 1);
    expect(announcer.peers()[0]).toMatchObject({ address: '127.0.0.1', local: '127.0.0.1', announcing: false, bfd: 'Down' });
    // The speaker's /metrics: the peer's BGP session and its BFD session.
    const metrics = await registry.metrics();
    expect(metrics).toContain('edge_ccm_bfd_session_state{peer="127.0.0.1"} 1');
    expect(metrics).toContain('edge_ccm_bfd_session_downs_total{peer="127.0.0.1"} 0');
    expect(metrics).toMatch(/^edge_ccm_bgp_session_established\{peer="127.0.0.1",peer_asn="65000"\} 0$/m);
    stop.abort();
    await running;
  });
});
