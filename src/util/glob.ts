/** A glob (`*` any run of characters, `?` one character, nothing else special) as an anchored RegExp. */
export function globToRegExp(pattern: string): RegExp {
  return new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replaceAll('*', '.*').replaceAll('?', '.')}$`);
}
