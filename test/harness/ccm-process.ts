import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { ownDir, ownPid } from './processes.ts';

const ROOT = resolve(import.meta.dir, '../..');
const BUN = process.execPath;
const BINARY = join(ROOT, 'dist/edge-ccm');

/** The compiled binary's command line, as users run it; fails with the fix when it was not built. */
export function ccmBinaryCommand(args: string[], binary = BINARY): string[] {
  if (!existsSync(binary)) throw new Error(`${binary} is missing: run \`bun run build\` first (the README's test command, bash scripts/test.sh, builds it)`);
  return [binary, ...args];
}

/** The CLI from source with the fake provider (`--cloud-provider fake`) besides the real ones. */
export function fakeCcmCommand(args: string[]): string[] {
  return [BUN, join(ROOT, 'test/fakes/fake-ccm-main.ts'), ...args];
}

/**
 * An edge-ccm process for process-level tests: the compiled binary (dist/edge-ccm) or the CLI
 * with the fake provider linked in. Output is kept for assertions and shown when a test fails;
 * stop() ends it by pid; every started process is also ended when the test run exits.
 */
export class CcmProcess {
  readonly proc: ReturnType<typeof Bun.spawn>;
  private output = '';
  private readonly done: Promise<number>;

  private constructor(cmd: string[], env: Record<string, string | undefined>) {
    this.proc = Bun.spawn(cmd, { stdout: 'pipe', stderr: 'pipe', env: { ...process.env, ...env }, cwd: ROOT });
    // The harness's watchdog kills it if the test process dies without stopping it (bun test
    // runs no 'exit' handlers).
    const forget = ownPid(this.proc.pid);
    live.add(this);
    const collect = async (stream: ReadableStream<Uint8Array>) => {
      const decoder = new TextDecoder();
      for await (const chunk of stream) this.output += decoder.decode(chunk, { stream: true });
    };
    this.done = Promise.all([collect(this.proc.stdout as ReadableStream<Uint8Array>), collect(this.proc.stderr as ReadableStream<Uint8Array>)]).then(() => this.proc.exited);
    void this.done.finally(() => {
      live.delete(this);
      forget();
    });
  }

  /** The CLI from source with the fake provider (`--cloud-provider fake`) besides the real ones. */
  static fake(args: string[], env: Record<string, string | undefined> = {}): CcmProcess {
    return new CcmProcess(fakeCcmCommand(args), env);
  }

  /** The compiled binary, as users run it (built by the test command before the tests). */
  static binary(args: string[], env: Record<string, string | undefined> = {}, binary = BINARY): CcmProcess {
    return new CcmProcess(ccmBinaryCommand(args, binary), env);
  }

  /**
   * The compiled binary inside a network namespace (`ip netns exec NS dist/edge-ccm ...`, which
   * execs it: the pid is edge-ccm's own, so a SIGKILL is a real crash).
   */
  static binaryInNamespace(namespace: string, args: string[], env: Record<string, string | undefined> = {}, binary = BINARY): CcmProcess {
    return new CcmProcess(['ip', 'netns', 'exec', namespace, ...ccmBinaryCommand(args, binary)], env);
  }

  get pid(): number {
    return this.proc.pid;
  }

  logs(): string {
    return this.output;
  }

  /** Waits until the output contains `text` (or matches), failing with the output so far. */
  async waitForLog(text: string | RegExp, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const found = () => (typeof text === 'string' ? this.output.includes(text) : text.test(this.output));
    while (!found()) {
      if (this.proc.exitCode !== null) throw new Error(`edge-ccm exited (${this.proc.exitCode}) before logging ${text}:\n${this.output.slice(-4000)}`);
      if (Date.now() > deadline) throw new Error(`edge-ccm did not log ${text} within ${timeoutMs}ms:\n${this.output.slice(-4000)}`);
      await Bun.sleep(50);
    }
  }

  /** Sends a signal and waits for the exit code. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 30_000): Promise<number> {
    if (this.proc.exitCode === null) this.proc.kill(signal);
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    try {
      return await this.done;
    } finally {
      clearTimeout(timer);
    }
  }

  exited(): Promise<number> {
    return this.done;
  }

  /**
   * Ends every edge-ccm this test file started that is still running (for afterEach/afterAll),
   * so a test that fails midway never leaves a replica holding a lease for the next one.
   */
  static async stopAll(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await Promise.all([...live].map((p) => p.stop(signal)));
  }
}

const live = new Set<CcmProcess>();
process.on('exit', () => {
  for (const p of live) if (p.proc.exitCode === null) p.proc.kill('SIGKILL');
});

/** A temp dir removed (with processes recorded in it) when the run ends, however it ends. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  ownDir(dir);
  return dir;
}

/** A cloud config for the fake provider giving every node metadata (type t, zone z, region r), in a new temp dir. */
export function fakeProviderConfig(prefix: string): string {
  const path = join(tempDir(prefix), 'fake.json');
  writeFileSync(path, JSON.stringify({ autoMetadata: { instanceType: 't', zone: 'z', region: 'r' } }));
  return path;
}
