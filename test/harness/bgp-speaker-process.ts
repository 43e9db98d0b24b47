import { join } from 'node:path';
import type { Announcement, SpeakerConfig, SpeakerStats, StateChange } from '../../src/net/bgp/speaker.ts';
import { eventually } from './eventually.ts';
import type { NetnsLab, PipedProcess } from './netns.ts';
import { forEachLine } from './lines.ts';

const MAIN = join(import.meta.dir, '..', 'fakes', 'bgp-speaker-main.ts');

/** The speaker running in a lab namespace (test/fakes/bgp-speaker-main.ts), driven over stdin/stdout. */
export class SpeakerProcess {
  readonly states: StateChange[] = [];
  private nextId = 1;
  private readonly waiting = new Map<number, (r: { ok: boolean; error?: string; [k: string]: unknown }) => void>();

  private constructor(
    readonly proc: PipedProcess,
    private readonly lab: NetnsLab,
    readonly name: string,
  ) {
    void this.read();
  }

  /** `announcements`: the table the speaker starts with (before any session opens), as edge-ccm's announcer does. */
  static async start(lab: NetnsLab, role: string, config: SpeakerConfig, name = 'speaker', announcements?: Announcement[]): Promise<SpeakerProcess> {
    const proc = lab.spawnPiped(role, name, [process.execPath, MAIN]);
    const s = new SpeakerProcess(proc, lab, name);
    await s.call('start', { config, ...(announcements ? { announcements } : {}) });
    return s;
  }

  private read(): Promise<void> {
    return forEachLine(this.proc.stdout, (line) => {
      const m = JSON.parse(line);
      if (m.event === 'state') this.states.push(m);
      else this.waiting.get(m.id)?.(m);
    });
  }

  async call(op: string, args: object = {}): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    const result = new Promise<{ ok: boolean; error?: string; [k: string]: unknown }>((resolve) => this.waiting.set(id, resolve));
    this.proc.stdin.write(`${JSON.stringify({ id, op, ...args })}\n`);
    this.proc.stdin.flush();
    const exited = this.proc.exited.then((code) => ({ ok: false, error: `speaker exited ${code} (log: ${this.lab.dir}/${this.name}.log)` }));
    const r = await Promise.race([result, exited]);
    this.waiting.delete(id);
    if (!r.ok) throw new Error(`speaker ${op}: ${r.error}`);
    return r;
  }

  announce(announcements: Announcement[]): Promise<unknown> {
    return this.call('announce', { announcements });
  }

  async stats(): Promise<SpeakerStats & { cpuMicros: { user: number; system: number }; rssBytes: number }> {
    const r = await this.call('stats');
    return { ...(r.stats as SpeakerStats), cpuMicros: r.cpuMicros as { user: number; system: number }, rssBytes: r.rssBytes as number };
  }

  async established(address: string): Promise<void> {
    await eventually(`the speaker's session with ${address} established (log: ${this.lab.dir}/${this.name}.log)`, async () => (await this.stats()).peers.find((p) => p.address === address)?.state === 'established', 60_000, 200);
  }

  /** SIGKILL: the kernel closes its connections without a NOTIFICATION, like a crashed leader. */
  async kill(): Promise<void> {
    this.proc.kill('SIGKILL');
    await this.proc.exited;
  }

  async stop(graceful = false): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    await this.call('stop', { graceful }).catch(() => {});
    await this.proc.exited;
  }
}
