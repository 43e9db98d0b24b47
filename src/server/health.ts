import { errorMessage } from '../util/errors.ts';

/**
 * Named health checks and the three endpoints that run them, as Kubernetes' healthz package:
 * each check says which of /healthz, /readyz and /livez include it, checks can come and go
 * while serving (controllers start after leader election), and each endpoint aggregates its
 * checks the way kubelet probes and humans expect ("ok", or one [+]/[-] line per check).
 */

export type HealthEndpoint = 'healthz' | 'readyz' | 'livez';
export const HEALTH_ENDPOINTS: readonly HealthEndpoint[] = ['healthz', 'readyz', 'livez'];

/** Healthy when it returns; unhealthy when it throws or rejects (the error is the reason). */
export type HealthCheck = () => Promise<void> | void;

export interface HealthCheckOptions {
  /** Which endpoints run this check; default all three. */
  endpoints?: readonly HealthEndpoint[];
}

export interface CheckResult {
  name: string;
  /** Undefined when healthy, else the reason (for logs and authenticated callers only). */
  error?: string;
  /** Skipped through ?exclude=NAME. */
  excluded?: boolean;
}

interface RegisteredCheck {
  name: string;
  check: HealthCheck;
  endpoints: ReadonlySet<HealthEndpoint>;
}

export interface HealthChecksOptions {
  /** A check that has not answered by then counts as failed, so a probe never hangs. Default 10s. */
  timeoutMs?: number;
}

export class HealthChecks {
  private readonly checks = new Map<string, RegisteredCheck>();
  private readonly timeoutMs: number;

  constructor(options: HealthChecksOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
  }

  add(name: string, check: HealthCheck, options: HealthCheckOptions = {}): void {
    // The name is a URL path segment (/healthz/NAME) and a line prefix in the output.
    if (!/^[\w.-]+$/.test(name)) throw new Error(`invalid health check name "${name}": use letters, digits, '.', '_' or '-'`);
    if (this.checks.has(name)) throw new Error(`health check "${name}" is already registered`);
    const endpoints = new Set(options.endpoints ?? HEALTH_ENDPOINTS);
    this.checks.set(name, { name, check, endpoints });
  }

  remove(name: string): boolean {
    return this.checks.delete(name);
  }

  /** The names of the checks an endpoint runs, in the order they were added. */
  names(endpoint: HealthEndpoint): string[] {
    return [...this.checks.values()].filter((c) => c.endpoints.has(endpoint)).map((c) => c.name);
  }

  /** Runs every check of an endpoint (together), answering in the order they were added. */
  run(endpoint: HealthEndpoint, exclude: ReadonlySet<string> = new Set()): Promise<CheckResult[]> {
    const selected = [...this.checks.values()].filter((c) => c.endpoints.has(endpoint));
    return Promise.all(selected.map((c) => (exclude.has(c.name) ? { name: c.name, excluded: true } : this.runCheck(c))));
  }

  /** Runs one check of an endpoint; undefined when the endpoint has no such check. */
  async runOne(endpoint: HealthEndpoint, name: string): Promise<CheckResult | undefined> {
    const registered = this.checks.get(name);
    if (!registered?.endpoints.has(endpoint)) return undefined;
    return this.runCheck(registered);
  }

  private async runCheck({ name, check }: RegisteredCheck): Promise<CheckResult> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${this.timeoutMs}ms`)), this.timeoutMs);
    });
    try {
      await Promise.race([Promise.resolve().then(check), timeout]);
      return { name };
    } catch (e) {
      return { name, error: errorMessage(e) };
    } finally {
      clearTimeout(timer);
    }
  }
}

export interface HealthResponse {
  status: number;
  body: string;
}

/**
 * The aggregate endpoint's answer, in upstream's words: "ok" when all pass (the check list only
 * with ?verbose), else 500 listing every check. Reasons are always withheld here: the
 * aggregate endpoints are usually served without authentication.
 */
export function renderAggregate(
  endpoint: HealthEndpoint,
  results: CheckResult[],
  verbose: boolean,
  unknownExcludes: string[] = [],
): HealthResponse {
  const lines = results.map((r) =>
    r.excluded ? `[+]${r.name} excluded: ok` : r.error === undefined ? `[+]${r.name} ok` : `[-]${r.name} failed: reason withheld`,
  );
  if (unknownExcludes.length) {
    lines.push(`warn: some health checks cannot be excluded: no matches for ${unknownExcludes.map((n) => `"${n}"`).join(',')}`);
  }
  const failed = results.some((r) => r.error !== undefined);
  if (failed) return { status: 500, body: `${lines.join('\n')}\n${endpoint} check failed\n` };
  if (!verbose) return { status: 200, body: 'ok' };
  return { status: 200, body: `${lines.map((l) => l + '\n').join('')}${endpoint} check passed\n` };
}

/** One check's answer (/healthz/NAME); the reason only for a caller who proved who they are. */
export function renderSingle(result: CheckResult, showReason: boolean): HealthResponse {
  if (result.error === undefined) return { status: 200, body: 'ok' };
  return { status: 500, body: `internal server error: ${showReason ? result.error : 'reason withheld'}\n` };
}
