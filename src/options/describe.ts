/**
 * How a flag is presented to people, shared by --help and docs/flags.md: the type word and the
 * default as pflag prints them (durations in Go form, strings quoted, lists as [a,b], zero values
 * omitted).
 */
import { formatGoDuration } from '../util/duration.ts';
import type { FlagGroup } from './flag-def.ts';
import type { FlagKind, FlagKindValue } from './values.ts';

/** What presenting a flag reads of it, of any table (the manager's, a subcommand's): kind and default stay paired. */
export type DescribedFlag = {
  [K in FlagKind]: { readonly name: string; readonly shorthand?: string; readonly typeName?: string; readonly kind: K; readonly default: FlagKindValue[K] };
}[FlagKind];

const KIND_TYPE_NAMES: Record<FlagKind, string> = {
  string: 'string',
  bool: '',
  int: 'int',
  float: 'float',
  duration: 'duration',
  list: 'strings',
  repeated: 'stringArray',
};

/** The word after the flag name in --help ("duration", "int32"); empty for booleans. */
export function flagTypeName(def: DescribedFlag): string {
  return def.typeName ?? KIND_TYPE_NAMES[def.kind];
}

/** "-v, --v" or "--kubeconfig". */
export function flagNames(def: DescribedFlag): string {
  return def.shorthand === undefined ? `--${def.name}` : `-${def.shorthand}, --${def.name}`;
}

/** The default as pflag shows it, or undefined when it is the type's zero value (not shown). */
export function flagDefaultText(def: DescribedFlag): string | undefined {
  switch (def.kind) {
    case 'bool':
      return def.default ? 'true' : undefined;
    case 'int':
    case 'float':
      return def.default === 0 ? undefined : String(def.default);
    case 'duration':
      return def.default === 0 ? undefined : formatGoDuration(def.default);
    case 'list':
    case 'repeated':
      return def.default.length === 0 ? undefined : `[${def.default.join(',')}]`;
    case 'string':
      if (def.default === '') return undefined;
      return flagTypeName(def) === 'string' ? JSON.stringify(def.default) : def.default;
  }
}

/** "Secure serving" from "secure serving", as upstream titles its sections. */
export function groupTitle(group: FlagGroup): string {
  return group.charAt(0).toUpperCase() + group.slice(1);
}
