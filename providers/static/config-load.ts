import { readFileSync } from 'node:fs';
import * as v from 'valibot';
import { LineCounter, isMap, isScalar, isSeq, parseDocument, type Document, type Node } from 'yaml';
import type { StaticConfig } from './config-model.ts';
import { resolveStaticConfig, type ConfigIssue, type ConfigPath, type SecretSource } from './config-resolve.ts';
import { StaticConfigSchema, salvageConfig, type ResolvableConfig } from './config-schema.ts';

/**
 * Reads the static provider's YAML: every problem at once, each with the path of the value at
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

export type ConfigLoadResult = { ok: true; config: StaticConfig } | { ok: false; errors: ConfigError[] };

export const processSecrets: SecretSource = {
  readFile: (path) => readFileSync(path, 'utf8'),
  env: (name) => process.env[name],
};

/** Parses and validates a config text; `secrets` reads passwordFile/caFile/passwordEnv. */
export function loadStaticConfig(text: string, secrets: SecretSource = processSecrets): ConfigLoadResult {
  return loadYamlConfig(text, {
    schema: StaticConfigSchema,
    salvage: salvageConfig,
    resolve: (raw: ResolvableConfig) => resolveStaticConfig(raw, secrets),
  });
}

/**
 * How a provider's YAML file is checked: the valibot schema (shape), the valid parts of a file
 * that failed it (so the second pass still runs), and the second pass (meaning, references,
 * secrets), whose issues carry paths into the document.
 */
export interface YamlConfigSpec<Raw, Config> {
  schema: v.GenericSchema<unknown, unknown>;
  salvage(input: unknown): Raw;
  resolve(raw: Raw): { config: Config; issues: readonly ConfigIssue[] };
}

/**
 * Parses YAML and runs both passes, reporting every problem at once with its path and line.
 * Shared by the providers whose config is a YAML file (static, proxmox).
 */
export function loadYamlConfig<Raw, Config>(text: string, spec: YamlConfigSpec<Raw, Config>): { ok: true; config: Config } | { ok: false; errors: ConfigError[] } {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false });
  const lineAt = (offset: number) => lineCounter.linePos(offset).line;
  const errors: ConfigError[] = doc.errors.map((e) => ({
    path: formatPath(pathAt(doc, e.pos[0])),
    line: lineAt(e.pos[0]),
    message: e.code === 'DUPLICATE_KEY' ? 'duplicate key' : e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, ''),
  }));
  // A syntax error leaves no document worth checking further; duplicate keys do (the last one wins).
  if (doc.errors.some((e) => e.code !== 'DUPLICATE_KEY')) return { ok: false, errors: sortErrors(errors) };

  const located = (path: ConfigPath, message: string): ConfigError => ({ path: formatPath(path), line: lineAt(offsetOf(doc, path)), message });
  const input: unknown = doc.toJS() ?? {};
  const parsed = v.safeParse(spec.schema, input, { abortEarly: false });
  if (!parsed.success) {
    for (const issue of parsed.issues) {
      const path = (issue.path ?? []).map((p) => p.key as string | number);
      errors.push(located(path, issueMessage(issue, path)));
    }
  }
  // The second pass runs on the valid parts too, so one run reports every problem.
  const { config, issues } = spec.resolve(parsed.success ? (parsed.output as Raw) : spec.salvage(input));
  errors.push(...issues.map((i) => located(i.path, i.message)));
  if (errors.length) return { ok: false, errors: sortErrors(errors) };
  return { ok: true, config };
}

/** The `edge-ccm validate` entry point: no cluster, no side effects beyond reading secret files. */
export function validateStaticConfig(text: string, _path?: string, secrets: SecretSource = processSecrets): { ok: true } | { ok: false; errors: ConfigError[] } {
  const result = loadStaticConfig(text, secrets);
  return result.ok ? { ok: true } : result;
}

/** One line per error, `FILE:LINE: PATH: MESSAGE`, as compilers print them. */
export function formatConfigErrors(file: string | undefined, errors: readonly ConfigError[]): string {
  return errors.map((e) => `${file ?? '<cloud-config>'}:${e.line}: ${e.path ? e.path + ': ' : ''}${e.message}`).join('\n');
}

function issueMessage(issue: v.BaseIssue<unknown>, path: ConfigPath): string {
  const key = path.at(-1);
  if (issue.type === 'strict_object' && issue.expected === 'never') return `unknown key ${JSON.stringify(key)}`;
  if (issue.input === undefined && issue.kind === 'schema' && typeof key === 'string') return `missing required key ${JSON.stringify(key)}`;
  return issue.message.replace(/^Invalid type: /, 'wrong type: ');
}

function sortErrors(errors: ConfigError[]): ConfigError[] {
  return errors.sort((a, b) => a.line - b.line || a.path.localeCompare(b.path));
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
