import { formatIP, type IP, type IPFamily } from '../ip.ts';
import { AsPathSegment, Origin } from './constants.ts';
import type { Nlri } from './nlri.ts';
import { pathIds, pickNextHop, type BgpRoute } from './routes.ts';
import { endOfRib, packAnnouncements, packWithdrawals, type PathAttributes, type UpdateContext } from './update.ts';

/** What was negotiated with one peer that decides what it is sent. */
export interface PeerView {
  localAsn: number;
  ibgp: boolean;
  families: ReadonlySet<IPFamily>;
  /** The peer can receive several paths per prefix of this family (we send, it receives). */
  addPathSend: Record<IPFamily, boolean>;
  ctx: UpdateContext;
}

interface Path {
  family: IPFamily;
  prefixKey: string;
  nlri: Nlri;
  nextHop: IP;
  communities: number[];
  localPref?: number;
  /** Equal keys = same attributes, so those paths share UPDATEs. */
  attrKey: string;
}

const DEFAULT_LOCAL_PREF = 100;

/**
 * Adj-RIB-Out of one session (RFC 4271 3.2): the paths sent to the peer. `sync` turns it into
 * the caller's table with the fewest UPDATEs: withdrawals for paths that went, announcements
 * for new or changed paths, grouped by identical attributes so each UPDATE carries as many
 * prefixes as fit. Lives as long as the session: a new session starts empty (full table).
 */
export class AdjRibOut {
  private sent = new Map<string, Path>();
  private prefixCount = new Map<string, number>();

  constructor(private readonly view: PeerView) {}

  /** Distinct prefixes currently announced to the peer. */
  get prefixes(): number {
    return this.prefixCount.size;
  }

  /** UPDATE bodies that bring the peer from what it was sent to `routes`. */
  sync(routes: readonly BgpRoute[]): Uint8Array[] {
    const desired = this.desired(routes);
    const withdrawn: Path[] = [];
    for (const [key, path] of this.sent) if (!desired.has(key)) withdrawn.push(path);
    const announced: Path[] = [];
    for (const [key, path] of desired) if (this.sent.get(key)?.attrKey !== path.attrKey) announced.push(path);
    for (const p of withdrawn) this.forget(p);
    for (const p of announced) this.remember(p);
    return [...this.withdrawals(withdrawn), ...this.announcements(announced)];
  }

  /** Everything sent of `family` again, for a ROUTE-REFRESH (RFC 2918). */
  refresh(family: IPFamily): Uint8Array[] {
    return this.announcements([...this.sent.values()].filter((p) => p.family === family));
  }

  endOfRib(): Uint8Array[] {
    return [...this.view.families].sort().map((f) => endOfRib(f, this.view.ctx));
  }

  private desired(routes: readonly BgpRoute[]): Map<string, Path> {
    const out = new Map<string, Path>();
    for (const r of routes) {
      const family = r.prefix.family;
      if (!this.view.families.has(family) || r.nextHops.length === 0) continue;
      const localPref = this.view.ibgp ? (r.localPref ?? DEFAULT_LOCAL_PREF) : undefined;
      const add = (nextHop: IP, pathId: number | undefined) => {
        const key = pathId === undefined ? r.key : `${r.key}#${pathId}`;
        const attrKey = `${formatIP(nextHop)}|${r.communities.join(',')}|${localPref ?? ''}`;
        const nlri: Nlri = pathId === undefined ? { prefix: r.prefix } : { prefix: r.prefix, pathId };
        out.set(key, { family, prefixKey: r.key, nlri, nextHop, communities: r.communities, ...(localPref !== undefined ? { localPref } : {}), attrKey });
      };
      if (this.view.addPathSend[family]) {
        const ids = pathIds(r.nextHops);
        r.nextHops.forEach((h, i) => add(h, ids[i]));
      } else add(pickNextHop(r), undefined);
    }
    return out;
  }

  private key(p: Path): string {
    return p.nlri.pathId === undefined ? p.prefixKey : `${p.prefixKey}#${p.nlri.pathId}`;
  }

  private remember(p: Path): void {
    const key = this.key(p);
    if (!this.sent.has(key)) this.prefixCount.set(p.prefixKey, (this.prefixCount.get(p.prefixKey) ?? 0) + 1);
    this.sent.set(key, p);
  }

  private forget(p: Path): void {
    this.sent.delete(this.key(p));
    const n = (this.prefixCount.get(p.prefixKey) ?? 1) - 1;
    if (n <= 0) this.prefixCount.delete(p.prefixKey);
    else this.prefixCount.set(p.prefixKey, n);
  }

  private withdrawals(paths: Path[]): Uint8Array[] {
    const out: Uint8Array[] = [];
    for (const family of [4, 6] as const) {
      out.push(...packWithdrawals(family, paths.filter((p) => p.family === family).map((p) => p.nlri), this.view.ctx));
    }
    return out;
  }

  private announcements(paths: Path[]): Uint8Array[] {
    const groups = new Map<string, Path[]>();
    for (const p of paths) {
      const g = groups.get(`${p.family}|${p.attrKey}`);
      if (g) g.push(p);
      else groups.set(`${p.family}|${p.attrKey}`, [p]);
    }
    const out: Uint8Array[] = [];
    for (const group of groups.values()) {
      const first = group[0]!;
      const attrs: Omit<PathAttributes, 'nextHop' | 'mpReach' | 'mpUnreach'> = {
        origin: Origin.IGP,
        // Originated here: our AS alone towards eBGP, an empty path towards iBGP (RFC 4271 5.1.2).
        asPath: this.view.ibgp ? [] : [{ type: AsPathSegment.AS_SEQUENCE, asns: [this.view.localAsn] }],
        ...(first.localPref !== undefined ? { localPref: first.localPref } : {}),
        ...(first.communities.length > 0 ? { communities: first.communities } : {}),
        unknown: [],
      };
      out.push(...packAnnouncements(first.family, attrs, first.nextHop, group.map((p) => p.nlri), this.view.ctx));
    }
    return out;
  }
}
