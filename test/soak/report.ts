/** The figures of one run (docs/reliability.md lists them per run) and how they are printed. */

export interface Violation {
  kind: string;
  at: string;
  detail: string;
}

export interface ReplicaFigures {
  slot: string;
  starts: number;
  rssStartMiB: number;
  rssEndMiB: number;
  rssMaxMiB: number;
  socketsMax: number;
  fdsMax: number;
}

/** The network checks' own figures: how long a condition lasted at most (per kind, from the first round that saw it to the first that did not), the speakers' starts. */
export interface NetworkFigures {
  longestConditionMs: Record<string, number>;
  speakers: { slot: string; starts: number }[];
  /** The L2 prober: rounds judged, and the episodes in which two MACs answered one probe (count, rounds in all, longest). */
  l2Probe: { rounds: number; periodMs: number; toleranceMs: number; twoMacEpisodes: number; twoMacRounds: number; longestTwoMacMs: number };
  /** The nodes' router sampled against the speakers' deaths: how long a dead node's next hops stayed (deaths with next hops before). */
  deadHop: { samplePeriodMs: number; limitMs: number; checks: number; withdrawals: number; medianMs: number; maxMs: number };
}

export interface SoakReport {
  seed: number;
  profile: string;
  minutes: number;
  startedAt: string;
  durationSeconds: number;
  faults: Record<string, number>;
  faultsTotal: number;
  /** Drawn but not doable at the time (no leader to hit). */
  faultsSkipped: number;
  churn: Record<string, number>;
  churnTotal: number;
  failedOperations: number;
  checks: Record<string, number>;
  checksTotal: number;
  violations: Violation[];
  nearMisses: string[];
  recovery: Record<string, { n: number; medianMs: number; maxMs: number }>;
  replicas: ReplicaFigures[];
  /** Exits by the soak's signals, and unexpected ones; terms a replica ended in-process after losing its lease (it campaigns again, no exit). */
  exits: { signalled: number; termsLost: number; unexpected: number; configRefused: number };
  network: NetworkFigures;
  auditEvents: number;
}

export function median(xs: readonly number[]): number {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

const sec = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

export function formatReport(r: SoakReport): string {
  const lines = [
    `soak: seed ${r.seed}, profile ${r.profile}, ${r.minutes} min requested, ${(r.durationSeconds / 60).toFixed(1)} min run, started ${r.startedAt}`,
    `faults injected: ${r.faultsTotal} (${Object.entries(r.faults).map(([k, v]) => `${k} ${v}`).join(', ')}); skipped: ${r.faultsSkipped}`,
    `objects churned: ${r.churnTotal} (${Object.entries(r.churn).map(([k, v]) => `${k} ${v}`).join(', ')}); operations refused during faults: ${r.failedOperations}`,
    `invariant checks: ${r.checksTotal} (${Object.entries(r.checks).map(([k, v]) => `${k} ${v}`).join(', ')}); audit events read: ${r.auditEvents}`,
    `replica exits: ${r.exits.signalled} by the soak's signals, ${r.exits.unexpected} unexpected, ${r.exits.configRefused} refusing a config the soak held broken; terms ended in-process after a lost lease: ${r.exits.termsLost}`,
    `network: longest condition per kind: ${Object.entries(r.network.longestConditionMs).map(([k, v]) => `${k} ${sec(v)}`).join(', ') || 'none'}; speakers: ${r.network.speakers.map((x) => `${x.slot} starts ${x.starts}`).join(', ')}`,
    `L2 probe: ${r.network.l2Probe.rounds} rounds every ${r.network.l2Probe.periodMs} ms; two MACs answering one probe: ${r.network.l2Probe.twoMacEpisodes} episodes, ${r.network.l2Probe.twoMacRounds} rounds, longest ${sec(r.network.l2Probe.longestTwoMacMs)} (tolerated: ${sec(r.network.l2Probe.toleranceMs)})`,
    `BGP dead next hops: ${deadHopText(r.network.deadHop)}`,
    'recovery (fault end to canary served): ' + Object.entries(r.recovery).map(([k, v]) => `${k} n=${v.n} median ${sec(v.medianMs)} max ${sec(v.maxMs)}`).join('; '),
    'replicas: ' + r.replicas.map((x) => `${x.slot} starts ${x.starts} RSS ${x.rssStartMiB}->${x.rssEndMiB} MiB (max ${x.rssMaxMiB}), sockets max ${x.socketsMax}, fds max ${x.fdsMax}`).join('; '),
    `near misses (writes within the term tolerance): ${r.nearMisses.length}`,
    ...r.nearMisses.slice(0, 20).map((n) => `  near miss: ${n}`),
    `violations: ${r.violations.length}`,
    ...r.violations.map((v) => `  VIOLATION ${v.kind} at ${v.at}: ${v.detail}`),
  ];
  return lines.join('\n');
}

/** The run as the Markdown block docs/reliability.md keeps per run. */
export function formatMarkdown(r: SoakReport): string {
  const kinds = Object.keys(r.faults).sort();
  const rows = [
    `| seed | profile | duration | faults | objects churned | invariant checks | violations |`,
    `| --- | --- | --- | --- | --- | --- | --- |`,
    `| ${r.seed} | ${r.profile} | ${(r.durationSeconds / 60).toFixed(1)} min | ${r.faultsTotal} | ${r.churnTotal} | ${r.checksTotal} | ${r.violations.length} |`,
    '',
    `| fault kind | injected | recovery median | recovery max |`,
    `| --- | --- | --- | --- |`,
    ...kinds.map((k) => `| ${k} | ${r.faults[k]} | ${sec(r.recovery[k]?.medianMs ?? 0)} | ${sec(r.recovery[k]?.maxMs ?? 0)} |`),
    '',
    `| replica | starts | RSS start | RSS end | RSS max | sockets max |`,
    `| --- | --- | --- | --- | --- | --- |`,
    ...r.replicas.map((x) => `| ${x.slot} | ${x.starts} | ${x.rssStartMiB} MiB | ${x.rssEndMiB} MiB | ${x.rssMaxMiB} MiB | ${x.socketsMax} |`),
    '',
    `Checks: ${Object.entries(r.checks).map(([k, v]) => `${k} ${v}`).join(', ')}. Churn: ${Object.entries(r.churn).map(([k, v]) => `${k} ${v}`).join(', ')}. ` +
      `Replica exits: ${r.exits.signalled} signalled, ${r.exits.unexpected} unexpected, ${r.exits.configRefused} refusing a config the soak held broken; terms ended in-process after a lost lease: ${r.exits.termsLost}. ` +
      `Longest network condition: ${Object.entries(r.network.longestConditionMs).map(([k, v]) => `${k} ${sec(v)}`).join(', ') || 'none'}. ` +
      `L2 probe: ${r.network.l2Probe.rounds} rounds (every ${r.network.l2Probe.periodMs} ms), two MACs answering one probe in ${r.network.l2Probe.twoMacEpisodes} episodes (${r.network.l2Probe.twoMacRounds} rounds, longest ${sec(r.network.l2Probe.longestTwoMacMs)}; tolerated ${sec(r.network.l2Probe.toleranceMs)}). ` +
      `BGP dead next hops: ${deadHopText(r.network.deadHop)}. ` +
      `Writes within the term tolerance: ${r.nearMisses.length}.`,
  ];
  return rows.join('\n');
}

function deadHopText(d: NetworkFigures['deadHop']): string {
  return `${d.withdrawals} deaths of a node with next hops, withdrawn after median ${sec(d.medianMs)}, max ${sec(d.maxMs)} (sampled every ${d.samplePeriodMs} ms; limit ${sec(d.limitMs)} + the sampling)`;
}
