import type { V1Node } from '@kubernetes/client-node';
import type { Existence, InstanceMetadata, Instances } from '../../src/cloud/types.ts';
import { silentLogger, type Logger } from '../../src/log.ts';
import { ruleEffects } from '../../src/node-rules/index.ts';
import { nodeAddresses } from '../../src/node-addresses/select.ts';
import { instanceAddresses } from './addresses.ts';
import type { LxdApi } from './api.ts';
import type { LxdConfig } from './config-model.ts';
import { instanceFacts } from './facts.ts';
import { STATUS_RUNNING, STATUS_STOPPED, type Instance, type InstanceCache } from './instance-list.ts';
import { instanceTypeOf } from './instance-type.ts';
import { ListPass, matchNode, providerIDOf, type InstanceMatch } from './matching.ts';
import { readFailureDomains, readServerInfo } from './server.ts';

/**
 * InstancesV2 over the daemon's instance list: exists when listed (or when asked for by name it
 * answers), not-found only on the instance's own 404, unknown when the daemon cannot answer or
 * answers something of the wrong shape; shut down when Stopped.
 */
export class LxdInstances implements Instances {
  constructor(
    private readonly api: LxdApi,
    private readonly cache: InstanceCache,
    private readonly config: LxdConfig,
    private readonly logger: Logger = silentLogger,
  ) {}

  async instanceExists(node: V1Node, signal?: AbortSignal): Promise<Existence> {
    return this.existence(node, await this.match(node, new ListPass(this.cache, signal), signal));
  }

  async instancesExist(nodes: readonly V1Node[], signal?: AbortSignal): Promise<Existence[]> {
    const pass = new ListPass(this.cache, signal);
    return Promise.all(nodes.map(async (n) => this.existence(n, await this.match(n, pass, signal))));
  }

  /** Stopped: shut down; Running: not; anything else (starting, frozen, error) or no instance: undefined. */
  async instanceShutdown(node: V1Node, signal?: AbortSignal): Promise<boolean | undefined> {
    const m = await this.match(node, new ListPass(this.cache, signal), signal);
    if (m.kind !== 'found') return undefined;
    if (m.instance.statusCode === STATUS_STOPPED) return true;
    if (m.instance.statusCode === STATUS_RUNNING) return false;
    return undefined;
  }

  async instanceMetadata(node: V1Node, signal?: AbortSignal): Promise<InstanceMetadata | null> {
    const m = await this.match(node, new ListPass(this.cache, signal), signal);
    if (m.kind === 'absent') return null;
    if (m.kind === 'unknown') throw new Error(`cannot tell which LXD instance is node ${node.metadata?.name}: ${m.reason}`);
    const instance = m.instance;
    const identity = {
      providerID: providerIDOf(instance.project, instance.name),
      instanceType: instanceTypeOf(instance, this.config.instanceTypeKey),
      zone: await this.zoneOf(instance, signal),
      region: this.config.region,
    };
    const ips = instanceAddresses(instance, this.config.addresses);
    // A running instance whose network is not up yet: better to retry than to initialise the node without addresses.
    if (!ips.length && instance.statusCode === STATUS_RUNNING) throw new Error(`LXD instance ${instance.project}/${instance.name} has no global address yet on ${this.interfacesOf(instance)}`);
    return {
      ...identity,
      nodeAddresses: nodeAddresses(ips, instance.name, this.config.addresses),
      ruleEffects: ruleEffects(this.config.nodeRules, instanceFacts(instance, identity)),
    };
  }

  /** Zone: the cluster member's failure domain, else the member (location), else the server's name (not clustered). */
  private async zoneOf(instance: Instance, signal?: AbortSignal): Promise<string> {
    if (instance.location && instance.location !== 'none') {
      return (await readFailureDomains(this.api, signal)).get(instance.location) ?? instance.location;
    }
    return (await readServerInfo(this.api, signal)).serverName;
  }

  private interfacesOf(instance: Instance): string {
    const names = this.config.addresses.interfaces.length ? this.config.addresses.interfaces : instance.nics;
    return names.length ? names.join(', ') : 'no nic device';
  }

  private match(node: V1Node, pass: ListPass, signal?: AbortSignal): Promise<InstanceMatch> {
    return matchNode(node, this.api, this.config, pass, signal);
  }

  private existence(node: V1Node, m: InstanceMatch): Existence {
    if (m.kind === 'found') return 'exists';
    if (m.kind === 'absent') return 'not-found';
    this.logger.debug(2, 'LXD instance existence unknown', { node: node.metadata?.name, reason: m.reason });
    return 'unknown';
  }
}
