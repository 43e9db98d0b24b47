import { resolve } from 'node:path';
import { ownPid } from './processes.ts';

const ROOT = resolve(import.meta.dir, '../..');

export interface RunToEndOptions {
  /** The bound: a process still running after this long is killed (SIGKILL, by pid). */
  timeoutMs: number;
  /** Added to this process's environment; a key set to undefined is removed from it. */
  env?: Record<string, string | undefined>;
  /** Written to its stdin, which is then closed; without it stdin is /dev/null. */
  stdin?: string;
  /** Where it runs; the checkout's root unless given. */
  cwd?: string;
}

export interface RunToEndResult {
  /** 128 + the signal's number when a signal ended it (137 when the bound killed it). */
  exitCode: number;
  stdout: string;
  stderr: string;
  /** stdout and stderr together, in the order they arrived (as a terminal shows them). */
  output: string;
  /** The bound killed it: it hung. */
  killed: boolean;
}

/**
 * Runs a command to its end, for tests of a command line (the edge-ccm binary, the CLI, the demo).
 * The timeout is a bound, not a wait: a process that hangs is killed, so the test fails with what it
 * printed (killed, exit code 137) instead of the suite hanging until bun test's own timeout, which
 * shows nothing and leaves the process running. Its pid is owned as the harness's other children
 * are: killed too if the test process dies first.
 */
export async function runToEnd(cmd: string[], options: RunToEndOptions): Promise<RunToEndResult> {
  const proc = Bun.spawn(cmd, {
    cwd: options.cwd ?? ROOT,
    env: { ...process.env, ...options.env },
    stdin: options.stdin === undefined ? 'ignore' : new TextEncoder().encode(options.stdin),
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const forget = ownPid(proc.pid);
  let killed = false;
  const timer = setTimeout(() => {
    if (proc.exitCode !== null || proc.signalCode !== null) return; // ended; its output still draining
    killed = true;
    proc.kill('SIGKILL');
  }, options.timeoutMs);
  let output = '';
  const collect = async (stream: ReadableStream<Uint8Array>): Promise<string> => {
    const decoder = new TextDecoder();
    let text = '';
    const add = (chunk: string) => {
      text += chunk;
      output += chunk;
    };
    for await (const bytes of stream) add(decoder.decode(bytes, { stream: true }));
    add(decoder.decode());
    return text;
  };
  try {
    const [stdout, stderr, exitCode] = await Promise.all([collect(proc.stdout), collect(proc.stderr), proc.exited]);
    return { exitCode, stdout, stderr, output, killed };
  } finally {
    clearTimeout(timer);
    forget();
  }
}
