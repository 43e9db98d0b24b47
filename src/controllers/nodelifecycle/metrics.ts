import { Counter, Gauge, type Registry } from '../../util/prom.ts';
import { perRegistry } from '../../util/per-registry.ts';
import type { Existence } from '../../cloud/types.ts';
import type { HoldReason } from './decide.ts';
import { DISTRUST_REASONS } from './snapshot.ts';

/** Why a deletion was held back: the decision's reasons plus the circuit breaker. */
export type HeldReason = HoldReason | 'breaker';

/** The lifecycle controller's metrics (beyond upstream, which has none). */
export class NodeLifecycleMetrics {
  readonly nodesDeleted: Counter;
  /** Counted once per node per period in which its deletion was held back. */
  readonly deletionsHeld: Counter<'reason' | 'provider'>;
  readonly existenceAnswers: Counter<'answer' | 'provider'>;
  /** Per provider: with several in one process each has its own breaker. */
  readonly breakerOpen: Gauge<'provider'>;
  private readonly providers = new Set<string>();
  /** "not found" answers not believed because the provider's answer was empty or shrunken (snapshot.ts). */
  readonly answersDistrusted: Counter<'reason'>;
  /** ProviderID schemes whose latest answer is not believed, by reason. */
  readonly answerDistrusted: Gauge<'reason'>;

  private constructor(registry: Registry) {
    const registers = [registry];
    this.nodesDeleted = new Counter({
      name: 'edge_ccm_nodes_deleted_total',
      help: 'Nodes deleted because their machine no longer exists in the cloud provider.',
      registers,
    });
    this.deletionsHeld = new Counter({
      name: 'edge_ccm_node_deletions_held_total',
      help: 'Periods in which a node whose machine was not found was kept, by reason (breaker, grace, policy, protected) and provider.',
      labelNames: ['reason', 'provider'],
      registers,
    });
    this.existenceAnswers = new Counter({
      name: 'edge_ccm_instance_existence_answers_total',
      help: 'Answers of the cloud provider to "does this node\'s machine exist", by answer (exists, not-found, unknown) and provider.',
      labelNames: ['answer', 'provider'],
      registers,
    });
    this.breakerOpen = new Gauge({
      name: 'edge_ccm_node_deletion_breaker_open',
      help: '1 while the node deletion circuit breaker of a provider holds back deletions, else 0.',
      labelNames: ['provider'],
      registers,
    });
    this.answersDistrusted = new Counter({
      name: 'edge_ccm_provider_answers_distrusted_total',
      help: '"Not found" answers taken as unknown because the provider\'s answer listed none of its machines (empty) or lost more than --node-deletion-shrink-max-share of them (shrunk).',
      labelNames: ['reason'],
      registers,
    });
    this.answerDistrusted = new Gauge({
      name: 'edge_ccm_provider_answer_distrusted',
      help: 'ProviderID schemes whose latest provider answer is not believed, by reason (empty, shrunk).',
      labelNames: ['reason'],
      registers,
    });
    // Every series exists from the start, so alerts and rate() see zeros rather than nothing.
    for (const reason of DISTRUST_REASONS) {
      this.answersDistrusted.inc({ reason }, 0);
      this.answerDistrusted.set({ reason }, 0);
    }
  }

  /** The per-provider series at zero, made the first time a provider is judged (alerts and rate() see zeros rather than nothing). */
  seeProvider(provider: string): void {
    if (this.providers.has(provider)) return;
    this.providers.add(provider);
    for (const reason of ['breaker', 'grace', 'policy', 'protected'] satisfies HeldReason[]) this.deletionsHeld.inc({ reason, provider }, 0);
    for (const answer of ['exists', 'not-found', 'unknown'] satisfies Existence[]) this.existenceAnswers.inc({ answer, provider }, 0);
    this.breakerOpen.set({ provider }, 0);
  }

  /** The metrics of a registry, created on first use. */
  static readonly for = perRegistry((registry) => new NodeLifecycleMetrics(registry));
}
