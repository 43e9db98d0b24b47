import { loadavg } from 'node:os';
import { ownPid } from '../test/harness/processes.ts';

/**
 * CPU load beside a bench (issue 39: the VIP's cold start on a loaded machine): `count` busy
 * loops (`sh -c 'while :; do :; done'`), each ended by its own pid. The load average is read at
 * the start and the end so a report says how loaded the machine was (it is shared: other work
 * adds to it).
 */
export class CpuLoad {
  private constructor(private readonly procs: { proc: ReturnType<typeof Bun.spawn>; forget: () => void }[], readonly startLoad: number[]) {}

  static start(count: number): CpuLoad {
    const procs = Array.from({ length: count }, () => {
      const proc = Bun.spawn(['sh', '-c', 'while :; do :; done'], { stdout: 'ignore', stderr: 'ignore' });
      // Killed however the bench ends.
      return { proc, forget: ownPid(proc.pid) };
    });
    return new CpuLoad(procs, loadavg());
  }

  /** "busy loops N; load average (1 min) at the start X, at the end Y". */
  describe(): string {
    return `busy loops ${this.procs.length}; load average (1 min) ${this.startLoad[0]!.toFixed(1)} at the start, ${loadavg()[0]!.toFixed(1)} at the end`;
  }

  async stop(): Promise<void> {
    for (const p of this.procs) p.proc.kill('SIGKILL');
    await Promise.all(this.procs.map((p) => p.proc.exited));
    for (const p of this.procs) p.forget();
  }
}
