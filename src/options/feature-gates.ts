/**
 * --feature-gates, read as component-base's feature gate reads it: `Name=bool` pairs, only gates
 * the upstream cloud-controller-manager knows (UPSTREAM_FEATURE_GATES), none set against its lock,
 * AllAlpha / AllBeta switching every unlocked alpha / beta gate that is not named itself.
 * The few gates that change what edge-ccm does are named in GATES_WITH_EFFECT; the others are
 * accepted (so a manifest written for an upstream CCM starts) and change nothing here.
 */
import { parseGoBool } from '../util/strconv.ts';
import { UPSTREAM_FEATURE_GATES, type UpstreamFeatureGate } from './upstream-flags.ts';

/** The gates edge-ccm acts on, and what each one does here (docs/flags.md). */
export const GATES_WITH_EFFECT = {
  CloudControllerManagerWatchBasedRoutesReconciliation:
    'the route controller reconciles when a node is added or deleted or its pod CIDRs or addresses change, at most ' +
    'once per 10s, instead of every --route-reconciliation-period',
  LoggingAlphaOptions: 'allows --log-text-split-stream and --log-json-split-stream',
} as const;
export type GateWithEffect = keyof typeof GATES_WITH_EFFECT;

export interface FeatureGates {
  enabled(name: GateWithEffect): boolean;
  /** Gates set explicitly, in the order given (for /configz-like reporting and logs). */
  readonly explicit: ReadonlyMap<string, boolean>;
  /** Upstream's warnings: setting a deprecated or GA gate. */
  readonly warnings: readonly string[];
}

const KNOWN = new Map<string, UpstreamFeatureGate>(UPSTREAM_FEATURE_GATES.map((g) => [g.name, g]));

export type FeatureGatesResult = { ok: true; gates: FeatureGates } | { ok: false; errors: string[] };

/** Reads the `Name=bool` entries of --feature-gates (already split at commas). */
export function resolveFeatureGates(entries: readonly string[]): FeatureGatesResult {
  const explicit = new Map<string, boolean>();
  const errors: string[] = [];
  const warnings: string[] = [];
  for (const entry of entries) {
    if (entry.trim() === '') continue;
    const eq = entry.indexOf('=');
    const name = (eq < 0 ? entry : entry.slice(0, eq)).trim();
    if (eq < 0) {
      errors.push(`missing bool value for ${name}`);
      continue;
    }
    const text = entry.slice(eq + 1).trim();
    const value = parseGoBool(text);
    if (value === undefined) {
      errors.push(`invalid value of ${name}=${text} (use true or false)`);
      continue;
    }
    const spec = KNOWN.get(name);
    if (!spec) {
      errors.push(`unrecognized feature gate: ${name}`);
      continue;
    }
    if (spec.locked && spec.default !== value) {
      errors.push(`cannot set feature gate ${name} to ${value}, feature is locked to ${spec.default}`);
      continue;
    }
    if (spec.preRelease === 'DEPRECATED') warnings.push(`setting deprecated feature gate ${name}=${value}: it will be removed in a future release`);
    else if (spec.preRelease === '') warnings.push(`setting GA feature gate ${name}=${value}: it will be removed in a future release`);
    explicit.set(name, value);
  }
  if (errors.length) return { ok: false, errors };
  const allOf = (stage: 'ALPHA' | 'BETA'): boolean | undefined => explicit.get(stage === 'ALPHA' ? 'AllAlpha' : 'AllBeta');
  const enabled = (name: string): boolean => {
    const own = explicit.get(name);
    if (own !== undefined) return own;
    const spec = KNOWN.get(name);
    if (!spec) return false;
    if (!spec.locked && (spec.preRelease === 'ALPHA' || spec.preRelease === 'BETA')) return allOf(spec.preRelease) ?? spec.default;
    return spec.default;
  };
  return { ok: true, gates: { enabled, explicit, warnings } };
}

/** Whether --feature-gates (already validated) turns on a gate edge-ccm acts on. */
export function gateEnabled(entries: readonly string[], gate: GateWithEffect): boolean {
  const result = resolveFeatureGates(entries);
  return result.ok && result.gates.enabled(gate);
}

/** The gates at their defaults: what runs when --feature-gates is not given. */
export function defaultFeatureGates(): FeatureGates {
  const result = resolveFeatureGates([]);
  if (!result.ok) throw new Error('unreachable: no entries');
  return result.gates;
}
