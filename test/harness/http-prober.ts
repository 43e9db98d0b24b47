import { join } from 'node:path';
import { eventually } from './eventually.ts';
import type { NetnsLab, PipedProcess } from './netns.ts';

const PROBE = join(import.meta.dir, '..', 'fakes', 'http-probe-main.ts');

/** What a prober saw: requests sent and failed, when each failed one was sent (epoch ms), answers by body. */
export interface ProbeResult {
  sent: number;
  failed: number;
  failedAt: number[];
  errors: string[];
  byNode: Record<string, number>;
}

/**
 * A client probing a URL at a fixed pace from a namespace of the lab (test/fakes/http-probe-main.ts:
 * one GET every period on a new connection, 1 s timeout each), until stopped.
 */
export class HttpProber {
  private printed = '';
  private readonly reading: Promise<void>;

  private constructor(private readonly client: PipedProcess) {
    this.reading = (async () => {
      for await (const chunk of client.stdout) this.printed += new TextDecoder().decode(chunk);
    })();
  }

  /** Starts probing `url` from `role`'s namespace every `periodMs`; resolves once a request was answered. */
  static async start(lab: NetnsLab, role: string, url: string, periodMs: number): Promise<HttpProber> {
    const prober = new HttpProber(lab.spawnPiped(role, `probe-${role}-${Date.now()}`, [process.execPath, PROBE, url, String(periodMs)]));
    try {
      await eventually(`the prober of ${url} from ${role} answered`, () => prober.printed.includes('started'), 30_000);
    } catch (e) {
      prober.kill();
      throw e;
    }
    return prober;
  }

  /** Stops sending, waits for the requests in flight; what it saw. */
  async stop(): Promise<ProbeResult> {
    this.client.stdin.write('stop\n');
    this.client.stdin.end();
    await this.reading;
    return JSON.parse(this.printed.trim().split('\n').pop()!) as ProbeResult;
  }

  /** Ends it at once (cleanup on a failure). */
  kill(): void {
    this.client.kill('SIGKILL');
  }
}
