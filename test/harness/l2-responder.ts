import { join } from 'node:path';
import type { AnnouncementProblem, ResponderEvent, ResponderStats } from '../../src/net/l2/responder.ts';
import { eventually } from './eventually.ts';
import type { NetnsLab, PipedProcess } from './netns.ts';
import { forEachLine } from './lines.ts';

const MAIN = join(import.meta.dir, '..', 'fakes', 'l2-responder-main.ts');

interface Reply {
  id?: number;
  problems?: AnnouncementProblem[];
  stats?: ResponderStats;
  announcements?: Record<string, string[]>;
  announcing?: string[];
  error?: string;
}

/** test/fakes/l2-responder-main.ts running in a lab namespace, driven over its stdin and stdout. */
export class ResponderChild {
  readonly events: ResponderEvent[] = [];
  private readonly replies = new Map<number, (reply: Reply) => void>();
  private nextId = 1;
  private ready = false;
  private output = '';

  private constructor(
    readonly name: string,
    private readonly proc: PipedProcess,
  ) {
    void this.read();
  }

  static async start(lab: NetnsLab, role: string, name = `responder-${role}`): Promise<ResponderChild> {
    const child = new ResponderChild(name, lab.spawnPiped(role, name, [process.execPath, MAIN]));
    await eventually(`${name} ready (log: ${join(lab.dir, `${name}.log`)})`, () => child.ready || (child.proc.exitCode !== null && Promise.reject(new Error(`${name} exited ${child.proc.exitCode}: ${child.output}`))), 30_000);
    return child;
  }

  get pid(): number {
    return this.proc.pid;
  }

  async announce(table: Record<string, string[]>): Promise<AnnouncementProblem[]> {
    return (await this.request({ announce: table })).problems!;
  }

  async stats(): Promise<{ stats: ResponderStats; announcements: Record<string, string[]>; announcing: string[] }> {
    const reply = await this.request({ stats: true });
    return { stats: reply.stats!, announcements: reply.announcements!, announcing: reply.announcing! };
  }

  /** Waits until its takeover announcements are all sent, so a probe sees only answers. */
  async settled(): Promise<void> {
    await eventually(`${this.name} done announcing`, async () => (await this.stats()).announcing.length === 0, 30_000);
  }

  /** SIGKILL by pid, as a crash or an OOM kill would end it; resolves once it is gone. */
  async kill(): Promise<void> {
    this.proc.kill('SIGKILL');
    await this.proc.exited;
  }

  private request(body: object): Promise<Reply> {
    const id = this.nextId++;
    const reply = new Promise<Reply>((resolve, reject) => {
      this.replies.set(id, (r) => (r.error ? reject(new Error(`${this.name}: ${r.error}`)) : resolve(r)));
      void this.proc.exited.then((code) => reject(new Error(`${this.name} exited ${code} before answering`)));
    });
    this.proc.stdin.write(`${JSON.stringify({ id, ...body })}\n`);
    void this.proc.stdin.flush();
    return reply;
  }

  private read(): Promise<void> {
    return forEachLine(this.proc.stdout, (line) => {
      this.output += `${line}\n`;
      const message = JSON.parse(line) as Reply & { ready?: boolean; event?: ResponderEvent };
      if (message.ready) this.ready = true;
      else if (message.event) this.events.push(message.event);
      else if (message.id !== undefined) this.replies.get(message.id)?.(message);
    });
  }
}
