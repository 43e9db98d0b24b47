import * as v from 'valibot';
import { LineCounter, isMap, isScalar, isSeq, parseDocument, type Document, type Node } from 'yaml';
import type { ConfigIssue, ConfigPath } from './issues.ts';
import { MAX_CONFIG_STRING_LENGTH, MAX_YAML_ALIAS_COUNT, capStrings } from './limits.ts';
import { isSecretPath, processSecrets, type ConfigWarningIssue, type SecretSource } from './secrets.ts';
import { didYouMean } from '../util/did-you-mean.ts';
import { compareCodeUnits } from '../util/compare.ts';

/**
 * Reads a provider's YAML config file: every problem at once, each with the path of the value at
 * fault and its line. The `yaml` package (not Bun's built-in parser) because it keeps positions
 * and refuses duplicate keys.
 */

export interface ConfigError {
  /** Where in the document, e.g. `inventory.machines[2].addresses[0].address`; empty for the whole file. */
  path: string;
  /** 1-based line of the value (or of its key) in the file. */
  line: number;
  message: string;
}

/** A problem that does not stop the file from loading (a secret file others can read), with its event reason. */
export interface ConfigWarning extends ConfigError {
  reason: string;
}

/** A loaded config: the configuration and its warnings, or every problem of the file. */
export type ConfigLoadResult<Config> = { ok: true; config: Config; warnings?: ConfigWarning[] } | { ok: false; errors: ConfigError[] };

/**
 * How a provider's YAML file is checked: the valibot schema (shape), the valid parts of a file
 * that failed it (so the second pass still runs), and the second pass (meaning, references,
 * secrets), whose issues carry paths into the document.
 */
export interface YamlConfigSpec<Raw, Config> {
  schema: v.GenericSchema<unknown, unknown>;
  salvage(input: unknown): Raw;
  resolve(raw: Raw, secrets: SecretSource): { config: Config; issues: readonly ConfigIssue[]; warnings?: readonly ConfigWarningIssue[] };
}

/** A provider's config loader: a text checked against `spec`, secrets read from `secrets` (this process's files and environment unless given). */
export function yamlConfigLoader<Raw, Config>(spec: YamlConfigSpec<Raw, Config>): (text: string, secrets?: SecretSource) => ConfigLoadResult<Config> {
  return (text, secrets = processSecrets) => loadYamlConfig(text, spec, secrets);
}

/** Parses YAML and runs both passes, reporting every problem at once with its path and line. */
function loadYamlConfig<Raw, Config>(text: string, spec: YamlConfigSpec<Raw, Config>, secrets: SecretSource): ConfigLoadResult<Config> {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false });
  const lineAt = (offset: number) => lineCounter.linePos(offset).line;
  const errors: ConfigError[] = doc.errors.map((e) => ({
    path: formatPath(pathAt(doc, e.pos[0])),
    line: lineAt(e.pos[0]),
    message: e.code === 'DUPLICATE_KEY' ? 'duplicate key' : shortYamlMessage(e.message),
  }));
  // A syntax error leaves no document worth checking further; duplicate keys do (the last one wins).
  if (doc.errors.some((e) => e.code !== 'DUPLICATE_KEY')) return { ok: false, errors: sortErrors(errors) };

  const located = (path: ConfigPath, message: string): ConfigError => ({ path: formatPath(path), line: lineAt(offsetOf(doc, path)), message });
  let input: unknown;
  try {
    input = doc.toJS({ maxAliasCount: MAX_YAML_ALIAS_COUNT }) ?? {};
  } catch (e) {
    // An alias bomb, or an alias whose anchor is missing: a config error like any other, never a crash.
    return { ok: false, errors: [{ path: '', line: 1, message: aliasMessage(e) }] };
  }
  const oversized = capStrings(input);
  const capped = new Set(oversized.filter((o) => !o.key).map((o) => formatPath(o.path)));
  for (const o of oversized) {
    errors.push(located(o.path, o.key ? `holds a key ${o.length} characters long; the limit is ${MAX_CONFIG_STRING_LENGTH}` : `is ${o.length} characters long; the limit is ${MAX_CONFIG_STRING_LENGTH}`));
  }
  const parsed = v.safeParse(spec.schema, input, { abortEarly: false });
  if (!parsed.success) {
    for (const issue of parsed.issues) {
      const path = (issue.path ?? []).map((p) => p.key as string | number);
      if (capped.has(formatPath(path))) continue; // reported above, by its length
      const known = knownKeysOf(spec.schema, issue);
      errors.push(located(path, issueMessage(issue, path, known)));
      for (const key of otherUnknownKeys(issue, known)) errors.push(located([...path.slice(0, -1), key], unknownKeyMessage(key, known)));
    }
  }
  // The second pass runs on the valid parts too, so one run reports every problem.
  const { config, issues, warnings = [] } = spec.resolve(parsed.success ? (parsed.output as Raw) : spec.salvage(input), secrets);
  errors.push(...issues.map((i) => located(i.path, i.message)));
  if (errors.length) return { ok: false, errors: sortErrors(errors) };
  return { ok: true, config, warnings: warnings.map((w) => ({ ...located(w.path, w.message), reason: w.reason })) };
}

/** The first line of a yaml parser message, without its position (the error has its line) and bounded. */
function shortYamlMessage(message: string): string {
  const first = message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
  return first.length > 200 ? `${first.slice(0, 200)}...` : first;
}

function aliasMessage(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  if (/excessive alias count/i.test(message)) {
    return `too many YAML aliases (more than ${MAX_YAML_ALIAS_COUNT} uses, counting the aliases inside what each one repeats): share settings through inventory.defaults, sites or racks instead`;
  }
  return `cannot be read as YAML: ${shortYamlMessage(message)}`;
}

/** One line per error, `FILE:LINE: PATH: MESSAGE`, as compilers print them. */
export function formatConfigErrors(file: string | undefined, errors: readonly ConfigError[]): string {
  return errors.map((e) => `${file ?? '<cloud-config>'}:${e.line}: ${e.path ? e.path + ': ' : ''}${e.message}`).join('\n');
}

/** `unknown key "zoen"`, with " (did you mean "zone"?)" when a key of that mapping is 2 edits away or less. */
function unknownKeyMessage(key: string | number | undefined, known: readonly string[]): string {
  return `unknown key ${JSON.stringify(key)}${didYouMean(String(key), known, (k) => JSON.stringify(k))}`;
}

function issueMessage(issue: v.BaseIssue<unknown>, path: ConfigPath, known: readonly string[]): string {
  const key = path.at(-1);
  if (issue.type === 'strict_object' && issue.expected === 'never') return unknownKeyMessage(key, known);
  if (issue.input === undefined && issue.kind === 'schema' && typeof key === 'string') return `missing required key ${JSON.stringify(key)}`;
  // valibot's type messages end "but received VALUE": never for a secret (our own messages do not repeat values).
  if (issue.kind === 'schema' && isSecretPath(path)) return `wrong type: expected ${issue.expected ?? 'another type'} (the value is a secret and is not shown)`;
  return issue.message.replace(/^Invalid type: /, 'wrong type: ');
}

/** The schema tree as valibot builds it: optional wraps, objects have entries, arrays an item, records a value. */
interface SchemaNode {
  wrapped?: SchemaNode;
  entries?: Record<string, SchemaNode>;
  item?: SchemaNode;
  value?: SchemaNode;
}

/** For an unknown-key issue, the keys its mapping knows (found by walking the schema to it); else none. */
function knownKeysOf(schema: v.GenericSchema<unknown, unknown>, issue: v.BaseIssue<unknown>): string[] {
  const items = issue.path ?? [];
  if (issue.type !== 'strict_object' || issue.expected !== 'never' || items.length === 0) return [];
  let node: SchemaNode | undefined = schema as unknown as SchemaNode;
  for (const { key } of items.slice(0, -1)) {
    while (node?.wrapped) node = node.wrapped;
    node = node?.entries ? node.entries[key as string] : (node?.item ?? node?.value);
  }
  while (node?.wrapped) node = node.wrapped;
  return node?.entries ? Object.keys(node.entries) : [];
}

/**
 * valibot reports only the first unknown key of a strict mapping: the others of the same mapping
 * (`known` are its keys), so every unknown key is reported in one run.
 */
function otherUnknownKeys(issue: v.BaseIssue<unknown>, known: readonly string[]): string[] {
  const reported = issue.path?.at(-1);
  if (issue.type !== 'strict_object' || issue.expected !== 'never' || !reported || known.length === 0) return [];
  return Object.keys(reported.input as Record<string, unknown>).filter((k) => k !== reported.key && !known.includes(k));
}

function sortErrors(errors: ConfigError[]): ConfigError[] {
  return errors.sort((a, b) => a.line - b.line || compareCodeUnits(a.path, b.path));
}

export function formatPath(path: ConfigPath): string {
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else if (/^[A-Za-z_][\w-]*$/.test(p)) out += out ? `.${p}` : p;
    else out += `[${JSON.stringify(p)}]`;
  }
  return out;
}

/**
 * Offset of the value at `path`, or of its key when it sits in a map (so an unknown or wrong key
 * points at its own line); a path that does not exist (a missing key) gives its parent's offset.
 */
function offsetOf(doc: Document, path: ConfigPath): number {
  let node: unknown = doc.contents;
  let offset = rangeStart(node) ?? 0;
  for (const segment of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === segment);
      if (!pair) break;
      offset = rangeStart(pair.key) ?? offset;
      node = pair.value;
    } else if (isSeq(node) && typeof segment === 'number' && node.items[segment] !== undefined) {
      node = node.items[segment];
      offset = rangeStart(node) ?? offset;
    } else break;
  }
  return offset;
}

/** The path of the deepest key or value whose text covers `offset` (for YAML errors, which carry only offsets). */
function pathAt(doc: Document, offset: number): ConfigPath {
  const path: ConfigPath = [];
  let node: unknown = doc.contents;
  for (;;) {
    if (isMap(node)) {
      const pair = node.items.find((p) => covers(p.key, offset) || covers(p.value, offset));
      if (!pair) return path;
      path.push(isScalar(pair.key) ? String(pair.key.value) : String(pair.key));
      if (covers(pair.key, offset)) return path;
      node = pair.value;
    } else if (isSeq(node)) {
      const i = node.items.findIndex((item) => covers(item, offset));
      if (i < 0) return path;
      path.push(i);
      node = node.items[i];
    } else return path;
  }
}

function rangeStart(node: unknown): number | undefined {
  return (node as Node | null)?.range?.[0];
}

function covers(node: unknown, offset: number): boolean {
  const range = (node as Node | null)?.range;
  return !!range && offset >= range[0] && offset < range[2];
}
