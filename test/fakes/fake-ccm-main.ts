/**
 * The edge-ccm command line with the fake provider linked in besides the real ones, for
 * process-level tests (leader election hand-over, RBAC, shutdown) that need answers a test can
 * change while the process runs. Usage is edge-ccm's, with `--cloud-provider fake` and
 * `--cloud-config FILE` pointing at a JSON FakeConfig; the file is re-read when it changes.
 */
import type { V1Node } from '@kubernetes/client-node';
import { readFileSync, statSync } from 'node:fs';
import { ProviderRegistry } from '../../src/cloud/registry.ts';
import type { Existence, InstanceMetadata } from '../../src/cloud/types.ts';
import { runCli } from '../../src/cmd/cli.ts';
import { registerProviders } from '../../src/providers.ts';
import type { SpeakerConfig } from '../../src/net/bgp/speaker.ts';
import { FakeCloud } from './fake-cloud.ts';

export interface FakeConfig {
  /** Metadata made up for every node: providerID fake://NAME and the node's own InternalIP. */
  autoMetadata?: { instanceType: string; zone: string; region: string; externalIP?: string };
  existence?: Record<string, Existence>;
  shutdown?: Record<string, boolean>;
  /** Every instances call throws (a provider outage). */
  outage?: boolean;
  ingressIP?: string;
  routes?: boolean;
  loadBalancer?: boolean;
  /** The provider's initialize never finishes until the start is cancelled. */
  initializeHangs?: boolean;
  /** The provider's initialize returns (successfully) only once the start is cancelled. */
  initializeOutlivesCancel?: boolean;
  /** A BGP speaker configuration (read at start only): the leader runs it, announcing nothing. */
  bgp?: SpeakerConfig;
  /** Names of address pools the load balancer reports (198.51.100.0/30 each, nothing in use): AddressPool objects. */
  pools?: string[];
}

function metadataFor(cfg: FakeConfig, node: V1Node): InstanceMetadata | null {
  const auto = cfg.autoMetadata;
  if (!auto) return null;
  const name = node.metadata?.name ?? '';
  const internal = node.status?.addresses?.find((a) => a.type === 'InternalIP')?.address;
  return {
    providerID: `fake://${name}`,
    instanceType: auto.instanceType,
    zone: auto.zone,
    region: auto.region,
    nodeAddresses: [
      ...(internal ? [{ type: 'InternalIP', address: internal }] : []),
      ...(auto.externalIP ? [{ type: 'ExternalIP', address: auto.externalIP }] : []),
      { type: 'Hostname', address: name },
    ],
  };
}

function applyConfig(cloud: FakeCloud, cfg: FakeConfig): void {
  cloud.defaults = { existence: 'exists', shutdown: false, metadata: (node: V1Node) => metadataFor(cfg, node) };
  cloud.nodes.clear();
  for (const [name, existence] of Object.entries(cfg.existence ?? {})) cloud.setNode(name, { existence });
  for (const [name, shutdown] of Object.entries(cfg.shutdown ?? {})) cloud.setNode(name, { ...cloud.nodes.get(name), shutdown });
  cloud.clearFailures();
  if (cfg.outage) {
    for (const m of ['instanceExists', 'instanceShutdown', 'instanceMetadata', 'instancesExist'] as const) cloud.failWith(m, new Error('fake provider outage'));
  }
  if (cfg.ingressIP) cloud.ingressIP = cfg.ingressIP;
  cloud.pools = (cfg.pools ?? []).map((name) => ({ name, addresses: ['198.51.100.0-198.51.100.3'], families: [{ family: 'IPv4', total: 4n, used: 0, kept: 0 }], services: [] }));
  // As a provider's reload: the status publisher shows the new pools at once.
  cloud.notifyChange();
}

function registerFake(registry: ProviderRegistry): void {
  registry.register('fake', ({ configPath }) => {
    const read = (): FakeConfig => (configPath ? (JSON.parse(readFileSync(configPath, 'utf8')) as FakeConfig) : {});
    const first = read();
    const cloud = new FakeCloud({ providerName: 'fake', routes: first.routes ?? true, loadBalancer: first.loadBalancer ?? true, ...(first.bgp ? { bgp: first.bgp } : {}) });
    applyConfig(cloud, first);
    cloud.initializeHangs = first.initializeHangs ?? false;
    cloud.initializeOutlivesCancel = first.initializeOutlivesCancel ?? false;
    if (configPath) {
      let mtime = statSync(configPath).mtimeMs;
      const timer = setInterval(() => {
        // A half-written file (or one gone for a moment) keeps the last good answers and is
        // read again on the next tick: a test's edit must never crash the process under test.
        try {
          const now = statSync(configPath).mtimeMs;
          if (now === mtime) return;
          const next = read();
          mtime = now;
          applyConfig(cloud, next);
        } catch (e) {
          process.stderr.write(`fake provider: config not applied yet: ${e instanceof Error ? e.message : String(e)}\n`);
        }
      }, 100);
      timer.unref();
    }
    return cloud;
  });
}

const providers = new ProviderRegistry();
registerProviders(providers);
registerFake(providers);
process.exit(await runCli(process.argv.slice(2), () => providers));
