/** The paths served without authentication by default (--authorization-always-allow-paths). */
export const DEFAULT_ALWAYS_ALLOW_PATHS: readonly string[] = ['/healthz', '/readyz', '/livez'];

/**
 * Matches request paths against --authorization-always-allow-paths as upstream's path
 * authorizer: exact paths, or a prefix when the pattern ends in `*` (a `*` anywhere else is
 * rejected). Leading slashes are ignored on both sides, so "/" and "" both mean the root.
 */
export function alwaysAllowMatcher(patterns: readonly string[]): (path: string) => boolean {
  const exact = new Set<string>();
  const prefixes: string[] = [];
  for (const raw of patterns) {
    const p = trimLeadingSlash(raw);
    if (p.slice(0, -1).includes('*')) throw new Error(`only a trailing * is allowed in always-allow path "${raw}"`);
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
