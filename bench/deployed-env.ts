import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The environment edge-ccm runs with where it is installed, read from the files that install it,
 * so that a bench runs each process as its DaemonSet, Deployment or unit does (and not with the
 * shell's environment: session 16 found the footprint bench's speaker without the DaemonSet's).
 */

const DEPLOY = join(import.meta.dir, '../deploy');

/** A Helm template's env entries with a literal value (`- name: X` then `value: "Y"`): what the chart sets for tuning, not what comes from the pod or the values. */
export function chartEnvironment(template: string): Record<string, string> {
  const path = join(DEPLOY, 'helm/edge-ccm/templates', template);
  const env = Object.fromEntries([...readFileSync(path, 'utf8').matchAll(/^\s+- name: (\w+)\n\s+value: "([^"{}]*)"$/gm)].map(([, name, value]) => [name!, value!]));
  if (Object.keys(env).length === 0) throw new Error(`${path}: no env entry with a literal value (bench/deployed-env.ts reads them)`);
  return env;
}

/** A systemd unit's `Environment=NAME=VALUE` lines. */
export function unitEnvironment(unit: string): Record<string, string> {
  const path = join(DEPLOY, 'systemd', unit);
  const env = Object.fromEntries(readFileSync(path, 'utf8').split('\n').filter((l) => l.startsWith('Environment=')).map((l) => {
    const kv = l.slice('Environment='.length);
    return [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)];
  }));
  if (Object.keys(env).length === 0) throw new Error(`${path}: no Environment= line (bench/deployed-env.ts reads them)`);
  return env;
}
