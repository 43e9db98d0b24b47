/**
 * The helm binary scripts/install-test-deps.sh builds from its Go module, found where that
 * script leaves it (the version read from its own default line, honouring the same override),
 * and run with its own config, cache and data directories so nothing under ~ is read or written.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dir, '..');
const INSTALL_SCRIPT = join(ROOT, 'scripts/install-test-deps.sh');
export const CHART_DIR = join(ROOT, 'deploy/helm/edge-ccm');

/** HELM_VERSION="${EDGE_CCM_HELM_VERSION:-vX.Y.Z}" from the install script. */
export function helmVersion(): string {
  const match = /^HELM_VERSION="\$\{(\w+):-([^}]+)\}"/m.exec(readFileSync(INSTALL_SCRIPT, 'utf8'));
  if (!match?.[1] || !match[2]) throw new Error(`${INSTALL_SCRIPT} has no HELM_VERSION="\${VAR:-default}" line`);
  return process.env[match[1]] || match[2];
}

export function helmBinary(): string {
  const cache = process.env.EDGE_CCM_CACHE || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'edge-ccm');
  const path = join(cache, `helm-${helmVersion()}`, 'helm');
  if (!existsSync(path)) throw new Error(`helm not found at ${path}: run \`bash scripts/install-test-deps.sh\` (builds it from its Go module)`);
  return path;
}

export interface HelmResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Runs helm; `env` adds to (e.g. KUBECONFIG), never replaces, the isolated environment. */
export function runHelm(args: string[], env: Record<string, string> = {}): HelmResult {
  const binary = helmBinary();
  const home = mkdtempSync(join(tmpdir(), 'edge-ccm-helm-home-'));
  try {
    const result = Bun.spawnSync([binary, ...args], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: home,
        HELM_CONFIG_HOME: join(home, 'config'),
        HELM_CACHE_HOME: join(home, 'cache'),
        HELM_DATA_HOME: join(home, 'data'),
        KUBECONFIG: join(home, 'no-kubeconfig'),
        ...env,
      },
    });
    return { exitCode: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** Like runHelm, but throws with helm's output unless it exits 0; returns stdout. */
export function helm(args: string[], env: Record<string, string> = {}): string {
  const r = runHelm(args, env);
  if (r.exitCode !== 0) throw new Error(`helm ${args.join(' ')} exited ${r.exitCode}:\n${r.stderr}${r.stdout}`);
  return r.stdout;
}
