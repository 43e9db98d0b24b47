import type { V1CertificateSigningRequest, V1Node, V1NodeAddress } from '@kubernetes/client-node';
import type { CloudProvider } from '../../cloud/types.ts';
import { Informer } from '../../kube/informer/index.ts';
import { ItemExponentialFailureRateLimiter, processNextItem, WorkQueue } from '../../kube/workqueue/index.ts';
import { CERTIFICATE_SIGNING_REQUESTS } from '../../kube/resources.ts';
import { errorMessage } from '../../util/errors.ts';
import { NODE_CSR_APPROVAL_CONTROLLER } from '../../names.ts';
import type { Controller, ControllerContext } from '../types.ts';
import { decide, DEFAULT_MINIMUM_KEY, KUBELET_SERVING_SIGNER, requestingNode, type Decision, type MinimumKey, type NodeFacts } from './decide.ts';

const MIN_RETRY_DELAY_MS = 1000;
const MAX_RETRY_DELAY_MS = 5 * 60_000;

export type CsrApprovalContext = Pick<ControllerContext, 'transport' | 'recorder' | 'logger' | 'nodeInformer' | 'isManagedNode' | 'workQueueMetrics'> & { cloud: Pick<CloudProvider, 'instances'> };

export interface CsrApprovalOptions {
  minimumKey?: MinimumKey;
}

export { NODE_CSR_APPROVAL_CONTROLLER };

/**
 * node-csr-approval: approves a kubelet's serving-certificate CSR (signer kubernetes.io/kubelet-serving)
 * when it asks only for what the provider knows of its machine (decide.ts), denies it otherwise
 * with the failed rule as the condition's reason and a Warning event. Nothing in Kubernetes
 * approves these (kube-controller-manager approves kubelet client CSRs only). Only pending CSRs of
 * that signer are watched (a field selector); decided ones are left alone.
 */
export class CsrApprovalController implements Controller {
  readonly name = NODE_CSR_APPROVAL_CONTROLLER;
  private readonly informer: Informer<V1CertificateSigningRequest>;
  private readonly queue: WorkQueue<string>;
  private readonly minimumKey: MinimumKey;

  constructor(private readonly ctx: CsrApprovalContext, opts: CsrApprovalOptions = {}) {
    this.minimumKey = opts.minimumKey ?? DEFAULT_MINIMUM_KEY;
    this.informer = new Informer<V1CertificateSigningRequest>({
      transport: ctx.transport,
      type: CERTIFICATE_SIGNING_REQUESTS,
      fieldSelector: `spec.signerName=${KUBELET_SERVING_SIGNER}`,
      logger: ctx.logger,
    });
    this.queue = new WorkQueue<string>('csr', {
      rateLimiter: new ItemExponentialFailureRateLimiter<string>(MIN_RETRY_DELAY_MS, MAX_RETRY_DELAY_MS),
      metrics: ctx.workQueueMetrics,
    });
  }

  async run(signal: AbortSignal): Promise<void> {
    const log = this.ctx.logger.with({ controller: this.name });
    const stop = () => this.queue.shutDown();
    signal.addEventListener('abort', stop, { once: true });
    const enqueue = (csr: V1CertificateSigningRequest) => {
      if (csr.metadata?.name && !isDecided(csr)) this.queue.add(csr.metadata.name);
    };
    this.informer.addHandlers({ onAdd: enqueue, onUpdate: (_, csr) => enqueue(csr) });
    const informerRun = this.informer.run(signal);
    try {
      const synced = await Promise.all([this.informer.waitForSync(signal), this.ctx.nodeInformer.waitForSync(signal)]);
      if (!synced.every(Boolean)) return;
      log.info('starting kubelet serving CSR approval');
      while (await processNextItem(this.queue, (name) => this.sync(name, signal), (name, error) => {
        if (!signal.aborted) log.error('error deciding CSR (retrying with exponential backoff)', { csr: name, error: errorMessage(error) });
      }));
    } finally {
      stop();
      signal.removeEventListener('abort', stop);
      await informerRun;
    }
  }

  /** Decides one pending CSR and writes the decision through the approval subresource. */
  async sync(name: string, signal?: AbortSignal): Promise<void> {
    const csr = this.informer.store.get(name);
    if (!csr || isDecided(csr)) return;
    const spec = csr.spec;
    const facts = {
      signerName: spec.signerName,
      usages: spec.usages ?? [],
      username: spec.username ?? '',
      groups: spec.groups ?? [],
      requestPem: Buffer.from(spec.request, 'base64').toString('utf8'),
    };
    const nodeName = requestingNode(facts);
    const node = nodeName ? this.ctx.nodeInformer.store.get(nodeName) : undefined;
    const decision = decide(facts, await this.nodeFacts(node, signal), this.minimumKey);
    if (decision.kind === 'ignore') return;
    await this.write(csr, decision, signal);
    const subject = { apiVersion: 'certificates.k8s.io/v1', kind: 'CertificateSigningRequest', metadata: { name, uid: csr.metadata?.uid } };
    if (decision.kind === 'approve') this.ctx.recorder.event(subject, 'Normal', 'CSRApproved', decision.message);
    else this.ctx.recorder.event(subject, 'Warning', `CSRDenied${decision.reason}`, decision.message);
    this.ctx.logger.info(`CSR ${decision.kind === 'approve' ? 'approved' : 'denied'}`, { controller: this.name, csr: name, node: nodeName, message: decision.message });
  }

  /** What the provider knows of the node's machine; a node it does not know is not managed. */
  private async nodeFacts(node: V1Node | undefined, signal?: AbortSignal): Promise<NodeFacts> {
    if (!node) return { exists: false, managed: false, addresses: [], dnsNames: [] };
    const metadata = this.ctx.isManagedNode(node) && this.ctx.cloud.instances ? await this.ctx.cloud.instances.instanceMetadata(node, signal) : null;
    if (!metadata) return { exists: true, managed: false, addresses: [], dnsNames: [] };
    const addresses = metadata.nodeAddresses;
    const hostname = (node.status?.addresses ?? []).filter((a) => a.type === 'Hostname').map((a) => a.address);
    return {
      exists: true,
      managed: true,
      addresses: addresses.filter((a) => isIpType(a)).map((a) => a.address),
      dnsNames: [...hostname, ...addresses.filter((a) => !isIpType(a)).map((a) => a.address)],
    };
  }

  private async write(csr: V1CertificateSigningRequest, decision: Exclude<Decision, { kind: 'ignore' }>, signal?: AbortSignal): Promise<void> {
    const condition = decision.kind === 'approve'
      ? { type: 'Approved', status: 'True', reason: 'EdgeCCMApproved', message: decision.message }
      : { type: 'Denied', status: 'True', reason: decision.reason, message: decision.message };
    const body = { ...csr, status: { ...csr.status, conditions: [...(csr.status?.conditions ?? []), { ...condition, lastUpdateTime: new Date().toISOString() }] } };
    await this.ctx.transport.request({
      method: 'PUT',
      path: `${CERTIFICATE_SIGNING_REQUESTS.apiPath}/${CERTIFICATE_SIGNING_REQUESTS.plural}/${encodeURIComponent(csr.metadata!.name!)}/approval`,
      body,
      signal,
    });
  }
}

function isIpType(address: V1NodeAddress): boolean {
  return address.type === 'InternalIP' || address.type === 'ExternalIP';
}

/** Approved or Denied already (by anyone): not ours to change. */
function isDecided(csr: V1CertificateSigningRequest): boolean {
  return (csr.status?.conditions ?? []).some((c) => (c.type === 'Approved' || c.type === 'Denied') && c.status !== 'False');
}
