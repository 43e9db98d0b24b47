/**
 * What one command-line flag is: the shape every flag table module (flags.ts and the
 * flags-*.ts beside it) declares its flags with, and the help sections in upstream's order.
 */
import type * as v from 'valibot';
import type { FlagKind, FlagKindValue } from './values.ts';

/** Help sections, in upstream's order (k8s.io/cloud-provider's NamedFlagSets, the controller sections together); ours last. */
export const FLAG_GROUPS = [
  'debugging',
  'leader-migration',
  'generic',
  'cloud-node-controller',
  'service-lb-controller',
  'nodeipam controller',
  'webhook',
  'webhook serving',
  'secure serving',
  'authentication',
  'authorization',
  'misc',
  'global',
  'edge-ccm',
] as const;
export type FlagGroup = (typeof FLAG_GROUPS)[number];
/** The flags of a subcommand with flags of its own (src/options/speaker.ts): one section of their own, not the manager's. */
export type CommandFlagGroup = 'speaker' | 'vip';

export interface FlagDef<Key extends string = string, Kind extends FlagKind = FlagKind, Value = FlagKindValue[Kind]> {
  /** Long name, without dashes. */
  readonly name: string;
  readonly shorthand?: string;
  /** Property of Options that receives the value. */
  readonly key: Key;
  readonly kind: Kind;
  readonly default: FlagKindValue[Kind];
  readonly group: FlagGroup | CommandFlagGroup;
  readonly help: string;
  /** The value's type as upstream's --help prints it, when it is not the kind's (int32, ip, Level). */
  readonly typeName?: string;
  /** Constraints on this flag alone; may narrow the type (a picklist). Cross-flag rules live in validate.ts. */
  readonly schema?: v.GenericSchema<FlagKindValue[Kind], Value>;
  /**
   * Set for an upstream flag that cannot mean anything in edge-ccm: why. It is still parsed and
   * checked as upstream does; when given, the daemon names it in one warning line at start.
   */
  readonly inert?: string;
}

export function flag<const Key extends string, Kind extends FlagKind, Value = FlagKindValue[Kind]>(
  def: FlagDef<Key, Kind, Value>,
): FlagDef<Key, Kind, Value> {
  return def;
}

/** "--name" as written on a command line. */
export function flagLabel(def: { name: string }): string {
  return `--${def.name}`;
}
