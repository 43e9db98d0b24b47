import type { V1Condition } from '@kubernetes/client-node';
import type { CloudProvider } from '../cloud/types.ts';
import type { Controller } from '../controllers/types.ts';
import { isNotFound } from '../kube/errors.ts';
import { ResourceClient } from '../kube/resources.ts';
import type { KubeTransport } from '../kube/transport.ts';
import type { Logger } from '../log.ts';
import { formatGoDuration } from '../util/duration.ts';
import { errorMessage } from '../util/errors.ts';
import { sleep } from '../util/time.ts';
import type { BreakerLink } from '../controllers/nodelifecycle/breaker-link.ts';
import { condition, desiredPoolObjects, statusUpdate, type AddressPoolObject, type AddressPoolObjectStatus } from './pool-objects.ts';
import { ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION, ADDRESS_POOLS, EDGE_CCM_STATUSES, INSTANCE_LABEL, STATUS_API_VERSION } from './resources.ts';
import { STATUS_PUBLISHER } from '../names.ts';

/**
 * Keeps the AddressPool objects and this instance's EdgeCCMStatus object (resources.ts) in line
 * with what edge-ccm knows, while it leads: a pass every `periodMs`, and at once after a config
 * reload or a rejected edit. Writes only what changed (a status patch per changed object; an
 * object created or deleted as pools come and go), and reads the EdgeCCMStatus object each pass
 * for an operator's breaker acknowledgment. Without the CRDs (not installed: a systemd install
 * without the chart's CRDs) it says so once and looks again every few minutes.
 */

/** Its name in logs, health checks and metrics: src/names.ts, the one list of names. */
export { STATUS_PUBLISHER };
const DEFAULT_PERIOD_MS = 10_000;
const CRD_RETRY_MS = 5 * 60_000;

export interface EdgeCCMStatusBody {
  config: { accepted: boolean; problems?: string };
  breaker: { state: 'Open' | 'Closed'; gone: number; allowed: number; managed: number; window: string; held: string[]; heldCount: number };
  conditions: V1Condition[];
}

interface EdgeCCMStatusObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; annotations?: Record<string, string> };
  status?: EdgeCCMStatusBody;
}

export interface StatusPublisherOptions {
  /** This instance's EdgeCCMStatus object: the leader-election Lease's name. */
  name: string;
  cloud: CloudProvider;
  transport: KubeTransport;
  logger: Logger;
  breaker?: BreakerLink;
  periodMs?: number;
  now?: () => Date;
}

export class StatusPublisher implements Controller {
  readonly name = STATUS_PUBLISHER;
  private readonly pools: ResourceClient<AddressPoolObject>;
  private readonly statuses: ResourceClient<EdgeCCMStatusObject>;
  /** The problems of the last edit, while it was rejected. */
  private rejected?: string;
  /** What the API holds, as last read or written; undefined: to be listed. */
  private poolCache?: Map<string, AddressPoolObjectStatus | undefined>;
  private crdsMissingUntil = 0;
  private wake?: () => void;

  constructor(private readonly opts: StatusPublisherOptions) {
    this.pools = new ResourceClient(opts.transport, ADDRESS_POOLS);
    this.statuses = new ResourceClient(opts.transport, EDGE_CCM_STATUSES);
  }

  async run(signal: AbortSignal): Promise<void> {
    const unsubscribe = [
      this.opts.cloud.onConfigRejected?.((problems) => {
        this.rejected = problems;
        this.wake?.();
      }),
      this.opts.cloud.onChange?.(() => {
        this.rejected = undefined;
        this.wake?.();
      }),
    ];
    this.opts.breaker?.onChange(() => this.wake?.());
    try {
      while (!signal.aborted) {
        try {
          await this.pass(signal);
        } catch (e) {
          if (signal.aborted) break;
          this.poolCache = undefined; // read afresh next time
          this.opts.logger.warn('cannot publish the AddressPool and EdgeCCMStatus objects; retrying', { error: errorMessage(e) });
        }
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          sleep(this.opts.periodMs ?? DEFAULT_PERIOD_MS, signal).then(resolve, resolve);
        });
        this.wake = undefined;
      }
    } finally {
      for (const u of unsubscribe) u?.();
    }
  }

  /** One pass; exported for tests. */
  async pass(signal?: AbortSignal): Promise<void> {
    if (Date.now() < this.crdsMissingUntil) return;
    try {
      await this.publishStatus(signal);
      await this.publishPools(signal);
    } catch (e) {
      if (!(e instanceof CrdsMissing)) throw e;
      this.crdsMissingUntil = Date.now() + CRD_RETRY_MS;
      this.poolCache = undefined;
      this.opts.logger.info('the edge-ccm.io CRDs (AddressPool, EdgeCCMStatus) are not installed: pools and breaker state are not shown with kubectl; install them from the Helm chart', {
        retryIn: formatGoDuration(CRD_RETRY_MS),
      });
    }
  }

  private async publishStatus(signal?: AbortSignal): Promise<void> {
    const name = this.opts.name;
    let current: EdgeCCMStatusObject;
    try {
      current = await this.statuses.get(name, { signal });
    } catch (e) {
      if (!isNotFound(e)) throw e;
      current = await this.createOrMissing(() => this.statuses.create({ apiVersion: STATUS_API_VERSION, kind: 'EdgeCCMStatus', metadata: { name } }, { signal }));
    }
    const breaker = this.opts.breaker;
    if (breaker) {
      const acknowledged = current.metadata.annotations?.[ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION]?.trim().toLowerCase() === 'true';
      breaker.setAcknowledgment(acknowledged ? current.status?.breaker?.held ?? [] : undefined);
      if (breaker.takeUsed() && current.metadata.annotations?.[ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION] !== undefined) {
        await this.statuses.patch(name, 'merge', { metadata: { annotations: { [ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION]: null } } }, { signal });
        this.opts.logger.info('node deletion acknowledgment used: annotation removed', { object: `edgeccmstatus/${name}` });
      }
    }
    const update = statusUpdate(current.status, this.desiredStatus(), this.now());
    if (update) await this.statuses.patch(name, 'merge', { status: update }, { subresource: 'status', signal });
  }

  private desiredStatus(): EdgeCCMStatusBody {
    const b = this.opts.breaker?.current;
    const rejected = this.rejected;
    return {
      config: rejected ? { accepted: false, problems: rejected } : { accepted: true },
      breaker: {
        state: b?.open ? 'Open' : 'Closed',
        gone: b?.gone ?? 0,
        allowed: b?.allowed ?? 0,
        managed: b?.population ?? 0,
        window: formatGoDuration(b?.windowMs ?? 0),
        held: b?.held ?? [],
        heldCount: b?.held.length ?? 0,
      },
      conditions: [
        rejected
          ? condition('ConfigAccepted', 'False', 'ConfigRejected', `the last edit of the cloud config was rejected; the last good configuration stays in force. Problems:\n${rejected}`)
          : condition('ConfigAccepted', 'True', 'ConfigInForce', 'the cloud config in force was accepted'),
        b?.open
          ? condition('DeletionBreakerOpen', 'True', 'TooManyGone',
            `${b.gone} of ${b.population} managed nodes were judged gone within ${formatGoDuration(b.windowMs)}, more than the ${b.allowed} allowed: ` +
            `${b.held.length} held. If their machines are really gone: kubectl annotate edgeccmstatus ${this.opts.name} ${ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION}=true`)
          : condition('DeletionBreakerOpen', 'False', 'WithinLimits', 'node deletions are within the breaker\'s limits'),
      ],
    };
  }

  private async publishPools(signal?: AbortSignal): Promise<void> {
    const desired = desiredPoolObjects(this.opts.name, this.opts.cloud.loadBalancer?.poolStatus?.() ?? [], this.rejected);
    if (!this.poolCache) {
      const listed = await this.pools.list({ query: { labelSelector: `${INSTANCE_LABEL}=${this.opts.name}` }, signal }).catch((e: unknown) => {
        throw isNotFound(e) ? new CrdsMissing() : e;
      });
      this.poolCache = new Map(listed.items.map((o) => [o.metadata.name, o.status]));
    }
    const cache = this.poolCache;
    for (const [name, want] of desired) {
      if (!cache.has(name)) {
        try {
          await this.pools.create({ apiVersion: want.apiVersion, kind: want.kind, metadata: want.metadata }, { signal });
        } catch (e) {
          if (isNotFound(e)) throw new CrdsMissing();
          // Another instance's pool of the same name: left alone (the log says so once per pass).
          this.opts.logger.warn('cannot create the AddressPool object', { pool: name, error: errorMessage(e) });
          continue;
        }
        cache.set(name, undefined);
      }
      const update = statusUpdate(cache.get(name), want.status!, this.now());
      if (!update) continue;
      await this.pools.patch(name, 'merge', { status: update }, { subresource: 'status', signal });
      cache.set(name, update);
    }
    for (const name of [...cache.keys()]) {
      if (desired.has(name)) continue;
      await this.pools.delete(name, { signal }).catch((e: unknown) => {
        if (!isNotFound(e)) throw e;
      });
      cache.delete(name);
    }
  }

  private async createOrMissing<T>(create: () => Promise<T>): Promise<T> {
    try {
      return await create();
    } catch (e) {
      if (isNotFound(e)) throw new CrdsMissing();
      throw e;
    }
  }

  private now(): Date {
    return this.opts.now?.() ?? new Date();
  }
}

class CrdsMissing extends Error {}
