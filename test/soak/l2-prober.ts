import { join } from 'node:path';
import type { NetnsLab, PipedProcess } from '../harness/netns.ts';
import { forEachLine } from '../harness/lines.ts';

const MAIN = join(import.meta.dir, 'l2-prober-main.ts');

/** One probe round: when its probes were sent, and the MACs that answered each address's probe. */
export interface ProbeRound {
  round: number;
  sentAt: number;
  answers: Map<string, string[]>;
}

/**
 * test/soak/l2-prober-main.ts in a lab namespace (the client's): one ARP request or Neighbor
 * Solicitation per address every `periodMs`, each round's answers handed to `onRound` as the
 * prober prints them (a round is complete 8 periods after it was sent: see the main's comment).
 * Killed with the lab (spawnPiped), or by stop().
 */
export class L2Prober {
  private readonly proc: PipedProcess;
  private stopped = false;
  /** The latest complete round. */
  last?: ProbeRound;

  constructor(
    lab: NetnsLab,
    role: string,
    iface: string,
    readonly periodMs: number,
    addresses: readonly string[],
    private readonly onRound: (r: ProbeRound) => void,
    private readonly onExit: (message: string) => void = () => {},
  ) {
    this.proc = lab.spawnPiped(role, 'l2-prober', [process.execPath, MAIN, iface, String(periodMs), ...addresses]);
    void this.read();
    void this.proc.exited.then((code) => {
      if (!this.stopped) this.onExit(`the L2 prober exited ${code} (log: ${join(lab.dir, 'l2-prober.log')})`);
    });
  }

  get pid(): number {
    return this.proc.pid;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.proc.kill('SIGTERM');
    await this.proc.exited;
  }

  private read(): Promise<void> {
    return forEachLine(this.proc.stdout, (line) => {
      let parsed: { r: number; t: number; a: Record<string, string[]> };
      try {
        parsed = JSON.parse(line);
      } catch {
        return;
      }
      const round = { round: parsed.r, sentAt: parsed.t, answers: new Map(Object.entries(parsed.a)) };
      this.last = round;
      this.onRound(round);
    });
  }
}
