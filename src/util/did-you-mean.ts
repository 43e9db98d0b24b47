/**
 * "did you mean X?" for a name that is not known, as kubectl and cobra suggest: the known name
 * nearest by edit distance (case ignored), if it is at most 2 edits away.
 */

/** The most edits a suggestion may be away from what was written (cobra's SuggestionsMinimumDistance). */
export const MAX_SUGGESTION_DISTANCE = 2;

/** Levenshtein distance: insertions, deletions and substitutions, each one edit. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** The known name nearest to `written` (the first of equals, in `known`'s order), or undefined when none is within 2 edits. */
export function nearestName(written: string, known: Iterable<string>): string | undefined {
  const lower = written.toLowerCase();
  let best: string | undefined;
  let bestDistance = MAX_SUGGESTION_DISTANCE + 1;
  for (const name of known) {
    if (name === written) continue;
    const distance = editDistance(lower, name.toLowerCase());
    if (distance < bestDistance) [best, bestDistance] = [name, distance];
  }
  return best;
}

/** " (did you mean X?)" with `format` applied to the suggestion, or "" when nothing known is near. */
export function didYouMean(written: string, known: Iterable<string>, format: (name: string) => string = (name) => name): string {
  const near = nearestName(written, known);
  return near === undefined ? '' : ` (did you mean ${format(near)}?)`;
}
