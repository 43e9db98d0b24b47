import { electNode } from '../../net/l2/election.ts';
import type { PeerReport } from '../l2/liveness.ts';
import { decodeWord, electsToken, encodeWord, type VipWord } from './word.ts';

/**
 * Who holds the control-plane VIP, as each host decides alone from its own API server's health
 * and the heartbeats it hears (docs/networking/control-plane-vip.md#the-rule). Pure: no I/O.
 *
 * Eligible (its heartbeats say "ready", with a fresh epoch each time it becomes so: word.ts):
 * warmed up, its API server healthy, and it hears more than half of the configured hosts (itself
 * included), is the only one configured, or has heard nobody since it started (bootstrap: then
 * only if it holds the VIP or a probe found nobody answering for it). Quorum is what keeps a host
 * cut off from the others (or deaf to them) from being a second holder: two disjoint groups
 * cannot both hear more than half.
 *
 * Elected, among the eligible hosts it hears and itself (`elect`): the preferred host if one is
 * configured and eligible; else the host that says it holds the VIP (sticky: a healthy holder
 * keeps it; two saying so, which the take rule below prevents, resolve to the first in the VIP's
 * rendezvous order); else, nobody holding, the first in that order.
 *
 * The take rule. A host that does not hold the VIP takes it only when it elects itself and every
 * peer it hears (except one leaving, which has released) last said: "not holding, I elect you in
 * your current epoch" (an ack). A host's word follows its act: it takes or releases, then says
 * so. Why two hosts X and Y that hear each other can never both take, whatever the messages'
 * delays and losses (hosts that stop hearing each other are quorum's and the silence grace's):
 *
 *   Say X takes at tx in its epoch eX, Y at ty >= tx in eY, and X still holds at ty. Y's last word
 *   from X, sent at s, acked Y@eY and said "not holding"; X says "holding" from tx on, so s < tx.
 *   X's word at s named eY, so X had heard Y in eY before tx, and Y stays in eY until ty (an epoch
 *   ends only when its host stops being eligible): X's last word from Y at tx, sent at s', says
 *   "Y ready in eY", and by the rule "not holding, I elect X@eX". Likewise Y had heard X in eX
 *   before s' < ty, so Y's last word from X (sent at s) says "X ready in eX". So at tx, X counts Y
 *   eligible and holding nothing, and at ty, Y counts X so. Each elected itself with the other
 *   among its candidates and no claimant (a claimant would have been elected instead): with a
 *   preferred host configured, one of them would have to be it and then the other elects it;
 *   without, each must rank before the other in one order both compute the same way. Absurd.
 *
 * At a cold start, two hosts whose warm-ups end within the same interval each wait for the
 * other's word: the first in the order takes one round trip later, the other never (issue 39:
 * before, each had last heard the other say "warming" and both took). A peer that cannot hear
 * this host (deaf to heartbeats) never answers: after one liveness timeout of eligibility, a
 * peer that still says "warming" and holds nothing no longer holds the take back. That one
 * exception rests on what the liveness timeout already assumes (a word arrives within it); the
 * rule above assumes nothing of the kind.
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
  /** From the liveness mesh, keyed by host name (views are words: word.ts). */
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
  /** This host's epoch if it is eligible now: its current one while it stays eligible, a new one (word.ts newEpoch) when it was not. */
  epoch: string;
  /** How long this host has been eligible in `epoch` (0 when it becomes eligible at this step). */
  eligibleForMs: number;
  /** After this long eligible, a peer still warming that has not acked no longer holds a take back (deaf to us). */
  livenessTimeoutMs: number;
  /** controlPlaneEndpoint.preferredHost: while eligible, it is elected (the ordered handback). */
  preferredHost?: string;
}

/** Why this host may be elected: quorum, the only host configured, bootstrap; or why not. */
export type VipBasis = 'quorum' | 'sole-candidate' | 'bootstrap' | 'warming' | 'apiserver-unhealthy' | 'no-quorum';

export interface VipDecision {
  /** Say "ready" in the heartbeats (eligible); otherwise "warming". */
  eligible: boolean;
  basis: VipBasis;
  /** Hears more than half of the hosts, itself included. */
  quorum: boolean;
  /** The eligible hosts this one counts (itself when eligible, and every peer heard saying ready), with their epochs. */
  candidates: Map<string, string>;
  /** The host this one elects; undefined when none is eligible. */
  holder?: string;
  /** Answer for the VIP after this step. */
  hold: boolean;
  /** A peer holding back this host's take: it has not acked it yet (or may still hold it). */
  blocker?: string;
  /** Bootstrap: this host would be eligible if a probe found the VIP free; run one. */
  needProbe: boolean;
  /** What to say in the heartbeats after acting on this decision (word.ts). */
  word: string;
}

export function decideVip(input: VipDecisionInput): VipDecision {
  const hosts = new Set(input.hosts);
  const peers = new Map([...input.peers].filter(([name]) => hosts.has(name) && name !== input.self));
  const words = new Map([...peers].map(([name, p]) => [name, decodeWord(p.view)]));
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
  const candidates = new Map<string, string>();
  const claimants = new Set<string>();
  if (eligible) candidates.set(input.self, input.epoch);
  if (eligible && input.holding) claimants.add(input.self);
  for (const [name, p] of peers) {
    if (!p.heard || p.state !== 'ready') continue;
    const w = words.get(name);
    candidates.set(name, w?.epoch ?? '');
    if (w?.holding) claimants.add(name);
  }
  const holder = elect(input.key, candidates, claimants, input.preferredHost);
  const holdingNow = eligible && holder === input.self && input.holding;
  const say = (hold: boolean): string => encodeWord({
    epoch: eligible ? input.epoch : '',
    holding: hold,
    elects: holder === undefined ? '' : electsToken(holder, candidates.get(holder)!),
  });
  const decision: VipDecision = { eligible, basis, quorum, candidates, holder, hold: holdingNow, needProbe, word: say(holdingNow) };
  if (!eligible || holder !== input.self || input.holding) return decision;
  const blocker = takeBlocker(input, peers, words);
  return blocker ? { ...decision, blocker } : { ...decision, hold: true, word: say(true) };
}

/**
 * The host elected among `candidates` (name -> epoch): the preferred host when eligible, else the
 * first claimant (a host saying it holds the VIP) in the rendezvous order, else the first candidate.
 */
export function elect(key: string, candidates: ReadonlyMap<string, string>, claimants: ReadonlySet<string>, preferredHost?: string): string | undefined {
  if (preferredHost !== undefined && candidates.has(preferredHost)) return preferredHost;
  return electNode(key, claimants.size > 0 ? claimants : candidates.keys());
}

/** The peer holding back this host's take (the take rule above), or undefined when it may take now. */
function takeBlocker(input: VipDecisionInput, peers: ReadonlyMap<string, PeerReport>, words: ReadonlyMap<string, VipWord | undefined>): string | undefined {
  const silent = [...input.recentlySilent].filter((n) => n !== input.self).sort()[0];
  if (silent) return silent;
  const ack = electsToken(input.self, input.epoch);
  const deafGrace = input.eligibleForMs >= input.livenessTimeoutMs;
  for (const name of [...peers.keys()].sort()) {
    const p = peers.get(name)!;
    if (!p.heard || p.state === 'leaving') continue;
    const w = words.get(name);
    if (w && !w.holding && w.elects === ack) continue;
    if (deafGrace && p.state === 'warming' && w && !w.holding) continue;
    return name;
  }
  return undefined;
}
