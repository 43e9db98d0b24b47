import { sha256Hex } from '../../util/digest.ts';
import type { PeerReport } from './liveness.ts';

/**
 * Who counts as alive for the L2 election, and whether this speaker may take an address now.
 * Pure: no I/O (the liveness mesh and the Node objects are read by the caller).
 *
 * Alive, normally: this speaker once warmed up, and every peer heard within the timeout that
 * says it is ready (a warming or leaving peer is heard but not eligible).
 *
 * Isolated (this speaker hears no peer at all while other Ready nodes exist): it cannot tell
 * its own deafness (inbound heartbeats dropped) from the death of all the others, and electing
 * itself everywhere would make it a second holder of every address if it is the deaf one. It
 * then keeps the view it had when it last heard someone (the others still hear it, so they elect
 * the same), narrowed by the API server: a node leaves it when its Node object leaves Ready
 * (about 40 s by default) or its speaker is known to be gone (its node refused our heartbeats
 * with ICMP port unreachable, or it said it was leaving). A speaker that has heard nobody since
 * it started has no such view: every Ready node counts.
 *
 * Takeover: an address this speaker does not yet answer for is taken only when no speaker it
 * hears may still hold it (takeoverBlocker): a peer still counting the former holder alive, or
 * the former holder itself still electing itself, makes it wait (a few ms: a change of view is
 * sent at once, after the release). Answering what it already answers is not held back (the
 * announcer re-checks it after an isolation ends).
 */

export interface ViewInput {
  self: string;
  /** This speaker warmed up and ready to answer. */
  selfReady: boolean;
  /** Nodes whose Node object is Ready (the API server's view, used only when isolated). */
  readyNodes: ReadonlySet<string>;
  /** From the liveness mesh. */
  peers: ReadonlyMap<string, PeerReport>;
  /** The alive set of the last view in which this speaker heard someone (undefined: never yet). */
  lastHeard?: ReadonlySet<string>;
}

export interface View {
  alive: Set<string>;
  /** Hears no peer while other Ready nodes exist. */
  isolated: boolean;
  /** Digest of `alive`, sent in the heartbeats. */
  digest: string;
}

export function electionView(input: ViewInput): View {
  const alive = new Set<string>();
  if (input.selfReady) alive.add(input.self);
  const heardAny = [...input.peers.values()].some((p) => p.heard && p.state !== 'leaving');
  const otherReady = [...input.readyNodes].some((n) => n !== input.self && !gone(input.peers.get(n)));
  const isolated = !heardAny && otherReady;
  if (isolated) {
    const basis = input.lastHeard ?? input.readyNodes;
    for (const n of basis) if (n !== input.self && input.readyNodes.has(n) && !gone(input.peers.get(n))) alive.add(n);
  } else {
    for (const [n, p] of input.peers) if (p.heard && p.state === 'ready') alive.add(n);
  }
  return { alive, isolated, digest: viewDigest(alive) };
}

/** Its speaker is known not to run: its node refused our heartbeats, or it said it was leaving (and was not heard since). */
function gone(p: PeerReport | undefined): boolean {
  return !!p && (p.refused || (p.state === 'leaving'));
}

export function viewDigest(alive: Iterable<string>): string {
  return sha256Hex([...alive].sort().join('\n')).slice(0, 16);
}

/** Ready peers heard whose view differs from ours (a peer sending no digest agrees with anyone). */
export function disagreeing(peers: ReadonlyMap<string, PeerReport>, digest: string): string[] {
  return [...peers].filter(([, p]) => p.heard && p.state === 'ready' && p.view !== '' && p.view !== digest).map(([n]) => n).sort();
}

/**
 * The set of nodes whose digest is `digest`, if it is ours or differs from ours by one node
 * (one speaker more or less: what a peer sees while a change is on its way to it); undefined
 * when it is further off (then the peer's election cannot be known here).
 */
export function decodeView(digest: string, alive: ReadonlySet<string>, others: Iterable<string>): Set<string> | undefined {
  if (viewDigest(alive) === digest) return new Set(alive);
  for (const x of alive) {
    const less = new Set(alive);
    less.delete(x);
    if (viewDigest(less) === digest) return less;
  }
  for (const y of others) {
    if (alive.has(y)) continue;
    const more = new Set(alive).add(y);
    if (viewDigest(more) === digest) return more;
  }
  return undefined;
}

/**
 * The peer that holds back this speaker's takeover of `address`, or undefined when it may take
 * it now. A ready peer heard with another view holds it back when that view elects the peer
 * itself, or a node that has not said (by a view electing someone else) that it let the address
 * go, or when its view cannot be decoded. So at a handback the new holder waits only for the
 * incumbent's release, not for every speaker to have heard of it; at a failover it waits until
 * the others no longer count the old holder alive (it may only be unheard by this speaker).
 */
export function takeoverBlocker(
  address: string,
  self: string,
  digest: string,
  peers: ReadonlyMap<string, PeerReport>,
  /** address -> owner under the view with that digest (undefined: not decodable). */
  ownersUnder: (digest: string) => ReadonlyMap<string, string | undefined> | undefined,
): string | undefined {
  for (const peer of disagreeing(peers, digest)) {
    const theirs = ownersUnder(peers.get(peer)!.view);
    if (!theirs) return peer;
    const holder = theirs.get(address);
    if (!holder || holder === self) continue;
    if (holder === peer) return peer;
    const h = peers.get(holder);
    if (h?.heard && h.state === 'ready') {
      if (h.view === '' || h.view === digest) continue;
      const own = ownersUnder(h.view);
      if (own && own.get(address) !== holder) continue;
    }
    return peer;
  }
  return undefined;
}
