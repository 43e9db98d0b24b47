/** The paths served without authentication by default (--authorization-always-allow-paths). */
export const DEFAULT_ALWAYS_ALLOW_PATHS: readonly string[] = ['/healthz', '/readyz', '/livez'];

/** Why a pattern cannot be an always-allow path (the flag is checked with this too); undefined when it can. */
export function alwaysAllowPathError(pattern: string): string | undefined {
  if (trimLeadingSlash(pattern).slice(0, -1).includes('*')) return `only a trailing * is allowed in always-allow path "${pattern}"`;
  return undefined;
}

/**
 * Matches request paths against --authorization-always-allow-paths as upstream's path
 * authorizer: exact paths, or a prefix when the pattern ends in `*` (a `*` anywhere else is
 * rejected). Leading slashes are ignored on both sides, so "/" and "" both mean the root.
 */
export function alwaysAllowMatcher(patterns: readonly string[]): (path: string) => boolean {
  const exact = new Set<string>();
  const prefixes: string[] = [];
  for (const raw of patterns) {
    const error = alwaysAllowPathError(raw);
    if (error !== undefined) throw new Error(error);
    const p = trimLeadingSlash(raw);
    if (p.endsWith('*')) prefixes.push(p.slice(0, -1));
    else exact.add(p);
  }
  return (path) => {
    const p = trimLeadingSlash(path);
    return exact.has(p) || prefixes.some((prefix) => p.startsWith(prefix));
  };
}

// Upstream trims one slash (strings.TrimPrefix).
const trimLeadingSlash = (p: string): string => (p.startsWith('/') ? p.slice(1) : p);
