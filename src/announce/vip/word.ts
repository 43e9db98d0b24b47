import { randomHex, sha256Hex } from '../../util/digest.ts';

/**
 * What one `edge-ccm vip` says about the VIP in its heartbeats (the liveness mesh's opaque `view`
 * field, at most 64 characters): its ready epoch, whether it answers for the VIP now, and whom it
 * elects. Pure: no I/O.
 *
 * - epoch: a random token drawn each time the host becomes eligible (says "ready"); "-" while it
 *   is not. It names one unbroken stretch of eligibility, so a word that elects "cp1@<epoch>"
 *   cannot be an answer to an earlier stretch of cp1's (decision.ts's proof rests on this).
 * - holding: 1 while the host answers for the VIP (set after taking, cleared after releasing:
 *   the word is only sent once the act is done).
 * - elects: a hash of "<host>@<epoch>" of the host it elects, "-" for none. Hashed: a host name
 *   may be longer than the field.
 */

export interface VipWord {
  epoch: string;
  holding: boolean;
  elects: string;
}

const NONE = '-';

/** A new epoch token: 8 hex characters (2^32: two stretches of one host never share one in practice). */
export function newEpoch(): string {
  return randomHex(4);
}

/** Who `host` is during `epoch`, as a word's `elects` names it. */
export function electsToken(host: string, epoch: string): string {
  return sha256Hex(`${host}@${epoch}`).slice(0, 12);
}

export function encodeWord(w: VipWord): string {
  return `${w.epoch || NONE}.${w.holding ? 1 : 0}.${w.elects || NONE}`;
}

/** The word in a heartbeat's view field; undefined when it is not one (empty: the sender has not decided yet; or another version's digest). */
export function decodeWord(view: string): VipWord | undefined {
  const m = /^([0-9a-f]{8}|-)\.([01])\.([0-9a-f]{12}|-)$/.exec(view);
  if (!m) return undefined;
  return { epoch: m[1] === NONE ? '' : m[1]!, holding: m[2] === '1', elects: m[3] === NONE ? '' : m[3]! };
}
