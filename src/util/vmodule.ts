import { globToRegExp } from './glob.ts';
import { INT32_MAX } from './strconv.ts';
/**
 * --vmodule: klog's `pattern=N,...`, each pattern a glob (`*`, `?`). klog matches it against Go
 * file names; edge-ccm matches it against the component a logger is for (its controller,
 * component, provider or informer field), the nearest thing a single bundled binary has to a file.
 */
export interface VModuleRule {
  pattern: string;
  verbosity: number;
  matches(name: string): boolean;
}

export type VModuleResult = { ok: true; rules: VModuleRule[] } | { ok: false; error: string };

export function parseVModule(text: string): VModuleResult {
  const rules: VModuleRule[] = [];
  if (text.trim() === '') return { ok: true, rules };
  for (const item of text.split(',')) {
    const eq = item.indexOf('=');
    if (eq < 0) return { ok: false, error: `${JSON.stringify(item)} does not have the pattern=N format` };
    const pattern = item.slice(0, eq).trim();
    const level = item.slice(eq + 1).trim();
    if (pattern === '') return { ok: false, error: 'File pattern must not be empty' };
    if (!/^\d+$/.test(level) || Number(level) > INT32_MAX) return { ok: false, error: `${JSON.stringify(level)} in ${JSON.stringify(item)} is not a verbosity level (0 to ${INT32_MAX})` };
    const glob = globToRegExp(pattern);
    rules.push({ pattern, verbosity: Number(level), matches: (name) => glob.test(name) });
  }
  return { ok: true, rules };
}

/** The verbosity for a logger of these components: the first rule matching one of them, else the global -v. */
export function verbosityFor(rules: readonly VModuleRule[], names: readonly string[], global: number): number {
  for (const rule of rules) if (names.some((n) => rule.matches(n))) return rule.verbosity;
  return global;
}
