import { electNode } from '../../net/l2/election.ts';
import type { PeerReport } from '../l2/liveness.ts';
import { decodeView, takeoverBlocker, viewDigest } from '../l2/view.ts';

/**
 * Who holds the control-plane VIP, as each host decides alone from its own API server's health
 * and the heartbeats it hears (docs/networking/control-plane-vip.md#the-rule). Pure: no I/O.
 *
 * A host is eligible (its heartbeats say "ready") while it is warmed up, its API server is healthy,
 * and it hears more than half of the configured hosts (itself included), is the only one
 * configured, or has heard nobody since it started (bootstrap: then only if it holds the VIP or
 * a probe found nobody answering for it). The holder is the first eligible host heard in the VIP's
 * rendezvous order. Quorum is what keeps a host cut off from the others (or deaf to them) from
 * being a second holder: two disjoint groups cannot both hear more than half.
 */

export interface VipDecisionInput {
  self: string;
  /** Every configured control-plane host, this one included. */
  hosts: readonly string[];
  /** What the rendezvous order is computed over (the VIP's addresses). */
  key: string;
  /** One liveness timeout has passed since the start (or since a pause): the hosts that are up have been heard. */
  warmedUp: boolean;
  /** The local API server's health check says healthy. */
  healthy: boolean;
  /** From the liveness mesh, keyed by host name. */
  peers: ReadonlyMap<string, PeerReport>;
  /** This host answers for the VIP now. */
  holding: boolean;
  /** A peer has been heard since this process started. */
  heardSinceStart: boolean;
  /** Bootstrap: a probe of the VIP, since this host last held it, found nobody answering. */
  probeClear: boolean;
  /**
   * Hosts this one last elected as holder that fell silent without saying so less than a grace
   * ago (not refused: their process may run, merely cut off from us, and releases only after its
   * own timeout without quorum). A takeover waits for them.
   */
  recentlySilent: ReadonlySet<string>;
}

/** Why this host may be elected: quorum, the only host configured, bootstrap; or why not. */
export type VipBasis = 'quorum' | 'sole-candidate' | 'bootstrap' | 'warming' | 'apiserver-unhealthy' | 'no-quorum';

export interface VipDecision {
  /** Say "ready" in the heartbeats (eligible); otherwise "warming". */
  eligible: boolean;
  basis: VipBasis;
  /** Hears more than half of the hosts, itself included. */
  quorum: boolean;
  /** The eligible hosts this one counts (itself when eligible, and every peer heard saying ready). */
  candidates: Set<string>;
  /** Digest of `candidates`, sent in the heartbeats (the takeover barrier of view.ts reads it). */
  digest: string;
  /** The host this one elects; undefined when none is eligible. */
  holder?: string;
  /** Answer for the VIP after this step. */
  hold: boolean;
  /** A peer holding back this host's takeover. */
  blocker?: string;
  /** Bootstrap: this host would be eligible if a probe found the VIP free; run one. */
  needProbe: boolean;
}

export function decideVip(input: VipDecisionInput): VipDecision {
  const hosts = new Set(input.hosts);
  const peers = new Map([...input.peers].filter(([name]) => hosts.has(name) && name !== input.self));
  const heard = [...peers.values()].filter((p) => p.heard && p.state !== 'leaving').length;
  const quorum = (heard + 1) * 2 > hosts.size;
  const alone = heard === 0 && !input.heardSinceStart;
  let basis: VipBasis;
  let needProbe = false;
  if (!input.warmedUp) basis = 'warming';
  else if (!input.healthy) basis = 'apiserver-unhealthy';
  else if (hosts.size === 1 && hosts.has(input.self)) basis = 'sole-candidate';
  else if (quorum) basis = 'quorum';
  else if (alone && (input.holding || input.probeClear)) basis = 'bootstrap';
  else {
    basis = 'no-quorum';
    needProbe = alone;
  }
  const eligible = basis === 'quorum' || basis === 'sole-candidate' || basis === 'bootstrap';
  const candidates = new Set<string>();
  if (eligible) candidates.add(input.self);
  for (const [name, p] of peers) if (p.heard && p.state === 'ready') candidates.add(name);
  const digest = viewDigest(candidates);
  const holder = electNode(input.key, candidates);
  const decision: VipDecision = { eligible, basis, quorum, candidates, digest, holder, hold: false, needProbe };
  if (!eligible || holder !== input.self) return decision;
  if (input.holding) return { ...decision, hold: true };
  const silent = [...input.recentlySilent].filter((n) => n !== input.self).sort()[0];
  if (silent) return { ...decision, blocker: silent };
  const ownersUnder = (d: string) => {
    const set = decodeView(d, candidates, hosts);
    return set && new Map([[input.key, electNode(input.key, set)]]);
  };
  const blocker = takeoverBlocker(input.key, input.self, digest, peers, ownersUnder);
  return blocker ? { ...decision, blocker } : { ...decision, hold: true };
}
