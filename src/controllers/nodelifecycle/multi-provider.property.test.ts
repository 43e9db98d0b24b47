import { expect, test } from 'bun:test';
import fc from 'fast-check';
import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { CompositeProvider, PLATFORM_ANNOTATION } from '../../cloud/composite-provider.ts';
import type { CloudProvider, Existence } from '../../cloud/types.ts';
import { Informer } from '../../kube/informer/index.ts';
import { TAINT_EXTERNAL_CLOUD_PROVIDER } from '../../kube/node-helpers.ts';
import { NODES } from '../../kube/resources.ts';
import type { KubeTransport } from '../../kube/transport.ts';
import { silentLogger } from '../../log.ts';
import { FakeClock } from '../../../test/fakes/fake-clock.ts';
import { RecordingEventRecorder } from '../../../test/fakes/event-recorder.ts';
import { controllerContext } from '../../../test/fakes/controller-context.ts';
import { CloudNodeLifecycleController, allowedGone, type DeleteOutcome, type LifecycleWriter } from './index.ts';

/**
 * Several providers in one process (src/cloud/composite-provider.ts) under the lifecycle
 * controller, over random mixes of nodes (static, proxmox, a platform nobody here serves, none
 * yet), machines and outages (a provider's API down, or answering an empty list):
 *
 * - no provider is ever asked about a node of another platform;
 * - a node of a platform nobody here serves, or of none yet, is never written (tainted, deleted);
 * - a node whose provider is down or answered nothing, or whose machine exists, is never deleted;
 * - the breaker counts per provider: a provider that answers is judged on its own nodes only, so
 *   its gone nodes are deleted (or held) exactly as if the other provider were not there.
 */

const SERVED = ['static', 'proxmox'] as const;
type Platform = (typeof SERVED)[number] | 'lxd' | 'none';
type Outage = 'up' | 'down' | 'empty';

interface NodeCase {
  platform: Platform;
  /** Set: the platform is said by the annotation, not a providerID (a kubelet waiting). */
  annotated: boolean;
  ready: boolean;
  machine: boolean;
}

const BREAKER = { maxShare: 0.5, windowMs: 60 * 60_000 };

const unusedTransport: KubeTransport = new Proxy({} as KubeTransport, {
  get: () => () => {
    throw new Error('no API calls here');
  },
});

class RecordingWriter implements LifecycleWriter {
  readonly written: string[] = [];
  readonly deleted: string[] = [];
  async addTaint(n: V1Node, taint: V1Taint): Promise<boolean> {
    this.written.push(n.metadata!.name!);
    void taint;
    return true;
  }
  async removeTaints(n: V1Node): Promise<boolean> {
    this.written.push(n.metadata!.name!);
    return true;
  }
  async deleteNode(n: V1Node): Promise<DeleteOutcome> {
    this.written.push(n.metadata!.name!);
    this.deleted.push(n.metadata!.name!);
    return 'deleted';
  }
}

function nodeOf(name: string, c: NodeCase): V1Node {
  const waiting = c.platform === 'none' || c.annotated;
  return {
    metadata: {
      name,
      uid: `uid-${name}`,
      resourceVersion: '1',
      annotations: c.annotated && c.platform !== 'none' ? { [PLATFORM_ANNOTATION]: c.platform } : undefined,
    },
    spec: {
      providerID: waiting ? undefined : `${c.platform}://${name}`,
      taints: waiting ? [{ key: TAINT_EXTERNAL_CLOUD_PROVIDER, value: 'true', effect: 'NoSchedule' }] : undefined,
    },
    status: { conditions: [{ type: 'Ready', status: c.ready ? 'True' : 'False' }] },
  };
}

/** One platform's provider: knows the machines of the cases of its platform, records every node it is asked about. */
function provider(platform: string, cases: Map<string, NodeCase>, outage: Outage, asked: string[][]): CloudProvider {
  const answer = (node: V1Node): Existence => {
    asked.push([platform, node.metadata!.name!]);
    if (outage === 'down') throw new Error(`${platform} API down`);
    if (outage === 'empty') return 'not-found';
    return cases.get(node.metadata!.name!)?.machine && cases.get(node.metadata!.name!)?.platform === platform ? 'exists' : 'not-found';
  };
  return {
    providerName: platform,
    platform,
    instances: {
      instanceExists: async (node) => answer(node),
      instanceShutdown: async (node) => (answer(node), false),
      instanceMetadata: async (node) => (answer(node), null),
    },
  };
}

const caseArb: fc.Arbitrary<NodeCase> = fc.record({
  platform: fc.constantFrom<Platform>('static', 'proxmox', 'lxd', 'none'),
  annotated: fc.boolean(),
  ready: fc.boolean(),
  machine: fc.boolean(),
});

test('no node is ever touched by a provider of another platform; one provider\'s outage or losses hold back nothing of another', async () => {
  await fc.assert(fc.asyncProperty(
    fc.array(caseArb, { minLength: 1, maxLength: 14 }),
    fc.constantFrom<Outage>('up', 'down', 'empty'),
    fc.constantFrom<Outage>('up', 'down', 'empty'),
    async (list, staticOutage, proxmoxOutage) => {
      const cases = new Map(list.map((c, i) => [`n${i}`, c]));
      const outages: Record<string, Outage> = { static: staticOutage, proxmox: proxmoxOutage };
      const asked: string[][] = [];
      const cloud = new CompositeProvider(SERVED.map((p) => ({ name: p, provider: provider(p, cases, outages[p]!, asked) })));
      const nodeInformer = new Informer<V1Node>({ transport: unusedTransport, type: NODES });
      for (const [name, c] of cases) nodeInformer.store.upsert(nodeOf(name, c));
      const writer = new RecordingWriter();
      const ctx = controllerContext({
        transport: unusedTransport,
        recorder: new RecordingEventRecorder(),
        logger: silentLogger,
        registry: new Registry(),
        cloud,
        nodeInformer,
        // As the app wires it: the ownership flags (here: every node) and the platforms served.
        isManagedNode: (n) => cloud.servesNode(n) && true,
      });
      const clock = new FakeClock(1_000_000);
      const controller = new CloudNodeLifecycleController(ctx, {
        monitorPeriodMs: 1000, gracePeriodMs: 0, notFoundThreshold: 1, deletionPolicy: 'delete', shrinkMaxShare: 1, breaker: BREAKER,
      }, { clock, writer });
      for (let pass = 0; pass < 3; pass++) {
        await controller.monitorNodes();
        clock.advance(1000);
      }

      const platformOf = (name: string) => cases.get(name)!.platform;
      for (const [platform, name] of asked) expect(`${name} asked of ${platform}`).toBe(`${name} asked of ${platformOf(name!)}`);
      for (const name of writer.written) expect(['static', 'proxmox']).toContain(platformOf(name));
      for (const name of writer.deleted) {
        const c = cases.get(name)!;
        expect(c.machine && c.platform === platformOf(name)).toBe(false);
        expect(outages[c.platform]).toBe('up');
        expect(c.ready).toBe(false);
      }
      // Each provider that answers is judged on its own nodes alone.
      for (const platform of SERVED) {
        if (outages[platform] !== 'up') continue;
        const mine = [...cases].filter(([, c]) => c.platform === platform);
        if (!mine.some(([, c]) => c.machine)) continue; // an empty answer: never believed
        const gone = mine.filter(([, c]) => !c.machine && !c.ready).map(([n]) => n).sort();
        const deleted = writer.deleted.filter((n) => platformOf(n) === platform).sort();
        expect(deleted).toEqual(gone.length <= allowedGone(BREAKER, mine.length) ? gone : []);
      }
    },
  ), { numRuns: 300 });
});
