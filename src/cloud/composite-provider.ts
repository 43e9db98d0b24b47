import type { V1Node } from '@kubernetes/client-node';
import type { EventRecorder } from '../kube/event-recorder.ts';
import { hasTaint, nodeEventSubject, nodeName, TAINT_EXTERNAL_CLOUD_PROVIDER } from '../kube/node-helpers.ts';
import { errorMessage } from '../util/errors.ts';
import { unmatchedBulkAnswer, type CloudProvider, type Existence, type InstanceMetadata, type Instances, type ProviderContext, type ProviderPartition } from './types.ts';

/**
 * Several providers in one process (beyond upstream; KEP-5778's "explicit node ownership"): one
 * CloudProvider the controllers call as ever, which hands each node to the provider of its
 * platform, the scheme of its providerID.
 *
 * - A node with a providerID goes to the provider of its scheme; none here serves it: it is not
 *   ours (servesNode false), so no controller reads, labels, taints or deletes it.
 * - A node without one (a kubelet waiting with the uninitialized taint) goes to the provider its
 *   `cloudprovider.kubernetes.io/platform` annotation names (another platform: not ours), else to
 *   the first provider, in the configured order, that knows its machine; none does: it is left
 *   alone, tainted, with an event naming the providers asked. Until it has a providerID or the
 *   annotation, no provider judges whether its machine exists (never deleted).
 * - Each provider's answers stay its own: one that is down or answers nothing makes only its own
 *   nodes' existence unknown (its partition, which the lifecycle controller judges apart: the
 *   empty-answer rule, grace periods and the deletion breaker count per provider), and its
 *   health check (`cloud-provider-<name>`, on /healthz) says so.
 * - Load balancers, routes and BGP are the first provider's (the address core is the same
 *   whichever provider carries it): the files of the others may not configure them.
 */

/** KEP-5778: the platform of a node that has no providerID yet. */
export const PLATFORM_ANNOTATION = 'cloudprovider.kubernetes.io/platform';

/** A provider behind the composite, under its --cloud-provider name. */
export interface CompositeMember {
  name: string;
  provider: CloudProvider;
}

/** The platform of a providerID (its scheme, as in `proxmox://fra1/101`); undefined when it has none. */
export function providerIDPlatform(providerID: string): string | undefined {
  return /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(providerID)?.[1];
}

interface Member extends CompositeMember, ProviderPartition {
  health: ProviderHealth;
}

/** Whether a provider's latest answers could be used; read by its health check. */
class ProviderHealth {
  failing?: { since: number; error: string };

  ok(): void {
    this.failing = undefined;
  }

  failed(error: string): void {
    this.failing = { since: this.failing?.since ?? Date.now(), error };
  }
}

export class CompositeProvider implements CloudProvider {
  readonly providerName: string;
  readonly partitions: readonly ProviderPartition[];
  readonly instances: Required<Instances>;
  readonly loadBalancer: CloudProvider['loadBalancer'];
  readonly routes: CloudProvider['routes'];
  readonly bgp: CloudProvider['bgp'];
  readonly relabelNodes: boolean;
  private readonly members: readonly Member[];
  private readonly byPlatform: ReadonlyMap<string, Member>;
  private recorder?: EventRecorder;

  constructor(members: readonly CompositeMember[]) {
    const problems = checkMembers(members);
    if (problems.length > 0) throw new Error(problems.join('\n'));
    this.members = members.map((m) => {
      const health = new ProviderHealth();
      return { ...m, platform: m.provider.platform!, health, instances: m.provider.instances && watched(m.provider.instances, health) };
    });
    this.partitions = this.members;
    this.byPlatform = new Map(this.members.map((m) => [m.platform, m]));
    this.providerName = members.map((m) => m.name).join(',');
    const first = members[0]!.provider;
    this.loadBalancer = first.loadBalancer;
    this.routes = first.routes;
    this.bgp = first.bgp;
    this.relabelNodes = members.some((m) => m.provider.relabelNodes);
    this.instances = {
      instanceExists: (node, signal) => this.instanceExists(node, signal),
      instancesExist: (nodes, signal) => this.instancesExist(nodes, signal),
      instanceShutdown: async (node, signal) => this.partitionOf(node)?.instances?.instanceShutdown(node, signal),
      instanceMetadata: (node, signal) => this.instanceMetadata(node, signal),
    };
  }

  partitionOf(node: V1Node): ProviderPartition | undefined {
    const id = node.spec?.providerID;
    if (id) return this.byPlatform.get(providerIDPlatform(id) ?? '');
    const annotated = node.metadata?.annotations?.[PLATFORM_ANNOTATION];
    return annotated === undefined ? undefined : this.byPlatform.get(annotated);
  }

  servesNode(node: V1Node): boolean {
    const id = node.spec?.providerID;
    if (id) return this.byPlatform.has(providerIDPlatform(id) ?? '');
    // No providerID: only a kubelet waiting for a cloud provider, and not one annotated for another platform.
    if (!hasTaint(node, TAINT_EXTERNAL_CLOUD_PROVIDER)) return false;
    const annotated = node.metadata?.annotations?.[PLATFORM_ANNOTATION];
    return annotated === undefined || this.byPlatform.has(annotated);
  }

  healthChecks(): readonly { name: string; check: () => void }[] {
    return this.members.map((m) => ({
      name: `cloud-provider-${m.name}`,
      check: () => {
        const failing = m.health.failing;
        if (failing) throw new Error(`${m.name} provider cannot tell whether its machines exist since ${new Date(failing.since).toISOString()}: ${failing.error}`);
      },
    }));
  }

  async initialize(ctx: ProviderContext): Promise<void> {
    this.recorder = ctx.recorder;
    await Promise.all(this.members.map((m) => m.provider.initialize?.({ ...ctx, logger: ctx.logger.with({ provider: m.name }) })));
  }

  async close(): Promise<void> {
    await Promise.all(this.members.map((m) => m.provider.close?.()));
  }

  onChange(listener: () => void): () => void {
    const offs = this.members.map((m) => m.provider.onChange?.(listener));
    return () => offs.forEach((off) => off?.());
  }

  onConfigRejected(listener: (problems: string) => void): () => void {
    const offs = this.members.map((m) => m.provider.onConfigRejected?.((problems) => listener(`${m.name} provider: ${problems}`)));
    return () => offs.forEach((off) => off?.());
  }

  onConfigWarning(listener: (reason: string, problems: string) => void): () => void {
    const offs = this.members.map((m) => m.provider.onConfigWarning?.((reason, problems) => listener(reason, `${m.name} provider: ${problems}`)));
    return () => offs.forEach((off) => off?.());
  }

  private async instanceExists(node: V1Node, signal?: AbortSignal): Promise<Existence> {
    const instances = this.partitionOf(node)?.instances;
    // Not known which platform it is of: nobody judges it gone.
    return instances ? instances.instanceExists(node, signal) : 'unknown';
  }

  /** Each provider asked about its own nodes only; one that fails or hangs leaves only its nodes unknown. */
  private async instancesExist(nodes: readonly V1Node[], signal?: AbortSignal): Promise<Existence[]> {
    const answers = new Array<Existence>(nodes.length).fill('unknown');
    /** Each provider's nodes, and where each stands in `nodes` (the answers are by position). */
    const groups = new Map<ProviderPartition, { nodes: V1Node[]; at: number[] }>();
    nodes.forEach((node, i) => {
      const partition = this.partitionOf(node);
      if (!partition?.instances) return;
      let group = groups.get(partition);
      if (!group) groups.set(partition, (group = { nodes: [], at: [] }));
      group.nodes.push(node);
      group.at.push(i);
    });
    await Promise.all([...groups].map(async ([partition, group]) => {
      const instances = partition.instances!;
      try {
        if (instances.instancesExist) {
          const reply = await instances.instancesExist(group.nodes, signal);
          // A reply that cannot be matched to the nodes leaves them unknown (its health says so: watched()).
          if (unmatchedBulkAnswer(reply, group.nodes.length) === undefined) group.at.forEach((at, i) => (answers[at] = reply[i] ?? 'unknown'));
        } else {
          await Promise.all(group.nodes.map(async (node, i) => (answers[group.at[i]!] = await instances.instanceExists(node, signal).catch((): Existence => 'unknown'))));
        }
      } catch {
        // Its nodes stay unknown; the others' answers stand.
      }
    }));
    return answers;
  }

  private async instanceMetadata(node: V1Node, signal?: AbortSignal): Promise<InstanceMetadata | null> {
    const partition = this.partitionOf(node);
    if (partition) return partition.instances ? ofPlatform(partition, await partition.instances.instanceMetadata(node, signal)) : null;
    if (!this.servesNode(node)) return null; // another platform's: never asked about
    // Waiting for its first providerID, platform not said: the first provider that knows the machine.
    const asked: string[] = [];
    for (const m of this.members) {
      if (!m.instances) continue;
      asked.push(m.name);
      let metadata: InstanceMetadata | null;
      try {
        metadata = await m.instances.instanceMetadata(node, signal);
      } catch (e) {
        // Not skipped: a later provider must not take a machine an earlier one may know.
        throw new Error(`${m.name} provider: ${errorMessage(e)}`);
      }
      if (metadata) return ofPlatform(m, metadata);
    }
    this.recorder?.event(nodeEventSubject(node), 'Warning', 'NoProviderKnowsMachine',
      `None of the providers asked (${asked.join(', ')}) knows the machine of node ${nodeName(node)}; left alone, tainted. ` +
      `Give it a providerID or annotate it ${PLATFORM_ANNOTATION}=<platform> (served here: ${this.members.map((m) => m.platform).join(', ')})`);
    return null;
  }
}

/** A provider's metadata, refused when its providerID is of another platform (a node must never change hands). */
function ofPlatform(partition: ProviderPartition, metadata: InstanceMetadata | null): InstanceMetadata | null {
  if (metadata?.providerID && providerIDPlatform(metadata.providerID) !== partition.platform) {
    throw new Error(`${partition.name} provider answered providerID ${metadata.providerID}, not of its platform ${partition.platform}`);
  }
  return metadata;
}

/** What makes a list of providers unusable together, one sentence each. */
function checkMembers(members: readonly CompositeMember[]): string[] {
  const problems: string[] = [];
  const platforms = new Map<string, string>();
  members.forEach((m, i) => {
    const platform = m.provider.platform;
    if (!platform) {
      problems.push(`${m.name} provider names no platform (providerID scheme), so it cannot run with other providers`);
    } else if (platforms.has(platform)) {
      problems.push(`${m.name} and ${platforms.get(platform)} providers both serve platform ${platform}`);
    } else {
      platforms.set(platform, m.name);
    }
    if (i === 0) return;
    const first = members[0]!.name;
    if ((m.provider.loadBalancer?.poolStatus?.() ?? []).length > 0) {
      problems.push(`${m.name} provider's file has loadBalancer pools: with several providers, load balancers come from the first one's file (${first}); move them there`);
    }
    if (m.provider.bgp?.speakerConfig()) {
      problems.push(`${m.name} provider's file has a bgp section: with several providers, routes and BGP come from the first one's file (${first}); move it there`);
    }
  });
  return problems;
}

/** A provider's instances, its outcomes told to its health. */
function watched(instances: Instances, health: ProviderHealth): Instances {
  const told = <T>(call: Promise<T>, judge: (value: T) => string | undefined): Promise<T> =>
    call.then((value) => {
      const failure = judge(value);
      if (failure) health.failed(failure);
      else health.ok();
      return value;
    }, (e: unknown) => {
      health.failed(errorMessage(e));
      throw e;
    });
  return {
    instanceExists: (node, signal) => told(instances.instanceExists(node, signal), (a) => (a === 'unknown' ? `cannot tell whether the machine of node ${nodeName(node)} exists` : undefined)),
    instanceShutdown: (node, signal) => instances.instanceShutdown(node, signal),
    instanceMetadata: (node, signal) => told(instances.instanceMetadata(node, signal), () => undefined),
    instancesExist: instances.instancesExist && ((nodes, signal) => told(instances.instancesExist!(nodes, signal), (reply) => {
      // A reply that cannot be matched to the nodes by position leaves them all unknown (instancesExist above): said here, not silently.
      const unmatched = unmatchedBulkAnswer(reply, nodes.length);
      if (unmatched !== undefined) return `its ${unmatched}`;
      return nodes.length > 0 && nodes.every((_, i) => (reply[i] ?? 'unknown') === 'unknown') ? `could not tell about any of its ${nodes.length} nodes` : undefined;
    })),
  };
}
