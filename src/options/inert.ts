import { FLAGS, flagLabel } from './flags.ts';

/**
 * The one warning line for upstream flags given that mean nothing here (FlagDef.inert), naming
 * each with why; undefined when none was given. The daemon logs it once at start.
 */
export function inertFlagsWarning(given: ReadonlySet<string>): string | undefined {
  const named = FLAGS.filter((def) => 'inert' in def && def.inert !== undefined && given.has(def.key));
  if (named.length === 0) return undefined;
  const parts = named.map((def) => `${flagLabel(def)} (${(def as { inert: string }).inert})`);
  return `flags accepted for compatibility that have no effect in edge-ccm: ${parts.join('; ')}`;
}
