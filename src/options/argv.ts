/**
 * Reading argv the way spf13/pflag does for the upstream binaries: `--name=value`,
 * `--name value`, bare `--bool` (a following word is never a bool's value), shorthands `-v=2`,
 * `-v 2`, `-v2`, `-h`, `_` read as `-` in names, `--` ends the flags. List flags accumulate like
 * pflag's StringSlice (the first use replaces the default). Unlike pflag it does not stop at the
 * first problem: every bad flag is reported. The first positional word is a subcommand; flags
 * after it are left to that command.
 */
import type { FlagError } from './errors.ts';
import type { FlagDef } from './flag-def.ts';
import { flagLabel } from './flag-def.ts';
import { parseFlagValue } from './values.ts';
import { didYouMean } from '../util/did-you-mean.ts';

export interface ScannedArgv {
  /** Every flag's value: its default unless given. */
  values: Record<string, unknown>;
  /** Keys of the flags given on the command line. */
  given: Set<string>;
  /** Keys of the flags whose last value could not be read (`values` keeps the one before). */
  unreadable: Set<string>;
  errors: FlagError[];
  command?: string;
  args: string[];
}

/** A flag table to read argv with: the manager's (flags.ts) or a subcommand's (speaker.ts). */
export type FlagTable = readonly FlagDef[];

interface TableIndex {
  byName: Map<string, FlagDef>;
  byShorthand: Map<string, FlagDef>;
}

const indexes = new WeakMap<FlagTable, TableIndex>();

function indexOf(table: FlagTable): TableIndex {
  let index = indexes.get(table);
  if (!index) {
    index = {
      byName: new Map(table.map((def) => [def.name, def])),
      byShorthand: new Map(table.flatMap((def): [string, FlagDef][] => (def.shorthand === undefined ? [] : [[def.shorthand, def]]))),
    };
    indexes.set(table, index);
  }
  return index;
}

export function scanArgv(argv: readonly string[], table: FlagTable): ScannedArgv {
  const { byName, byShorthand } = indexOf(table);
  const scan: ScannedArgv = {
    values: Object.fromEntries(table.map((def) => [def.key, structuredClone(def.default)])),
    given: new Set(),
    unreadable: new Set(),
    errors: [],
    args: [],
  };
  let i = 0;
  const nextArg = (): string | undefined => (i + 1 < argv.length ? argv[++i] : undefined);

  for (; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '') continue; // upstream ignores empty arguments (templated manifests produce them)
    if (arg === '--') {
      takePositionals(scan, argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      takePositionals(scan, argv.slice(i));
      break;
    }
    if (arg.startsWith('--')) scanLongFlag(scan, arg, nextArg, byName);
    else scanShorthands(scan, arg, nextArg, byShorthand);
  }
  return scan;
}

function takePositionals(scan: ScannedArgv, rest: readonly string[]): void {
  const first = rest.findIndex((word) => word !== '');
  if (first < 0) return;
  scan.command = rest[first];
  scan.args = rest.slice(first + 1);
}

function scanLongFlag(scan: ScannedArgv, arg: string, nextArg: () => string | undefined, byName: Map<string, FlagDef>): void {
  const body = arg.slice(2);
  if (body.startsWith('-') || body.startsWith('=')) {
    scan.errors.push({ flag: arg, message: 'bad flag syntax' });
    return;
  }
  const eq = body.indexOf('=');
  const name = eq < 0 ? body : body.slice(0, eq);
  const def = byName.get(name.replaceAll('_', '-'));
  if (!def) {
    scan.errors.push({ flag: `--${name}`, message: `unknown flag${didYouMean(name, byName.keys(), (known) => `--${known}`)}` });
    return;
  }
  let text: string | undefined = eq < 0 ? undefined : body.slice(eq + 1);
  if (text === undefined) text = def.kind === 'bool' ? 'true' : nextArg();
  if (text === undefined) {
    scan.errors.push({ flag: flagLabel(def), message: 'flag needs an argument' });
    return;
  }
  setFlag(scan, def, text);
}

function scanShorthands(scan: ScannedArgv, arg: string, nextArg: () => string | undefined, byShorthand: Map<string, FlagDef>): void {
  const letters = arg.slice(1);
  for (let j = 0; j < letters.length; j++) {
    const letter = letters[j] as string;
    const def = byShorthand.get(letter);
    if (!def) {
      scan.errors.push({ flag: `-${letter}`, message: `unknown shorthand flag: '${letter}' in ${arg}` });
      return;
    }
    let text: string | undefined;
    if (letters[j + 1] === '=') text = letters.slice(j + 2);
    else if (def.kind === 'bool') text = 'true';
    else if (j + 1 < letters.length) text = letters.slice(j + 1);
    else text = nextArg();
    if (text === undefined) {
      scan.errors.push({ flag: flagLabel(def), message: `flag needs an argument: '${letter}' in ${arg}` });
      return;
    }
    setFlag(scan, def, text);
    // A value ends the group; bare bools (-h) let the next letter be another shorthand.
    if (letters[j + 1] === '=' || def.kind !== 'bool') return;
  }
}

function setFlag(scan: ScannedArgv, def: FlagDef, text: string): void {
  const parsed = parseFlagValue(def.kind, text);
  if (!parsed.ok) {
    scan.errors.push({ flag: flagLabel(def), message: parsed.message });
    scan.unreadable.add(def.key);
    return;
  }
  const previous = scan.values[def.key];
  const accumulates = (def.kind === 'list' || def.kind === 'repeated') && scan.given.has(def.key) && Array.isArray(previous);
  scan.values[def.key] = accumulates ? [...previous, ...(parsed.value as string[])] : parsed.value;
  scan.given.add(def.key);
  scan.unreadable.delete(def.key); // a later good value is the one to check
}
