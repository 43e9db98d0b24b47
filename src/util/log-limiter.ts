/**
 * At most one log line per key per window: the first occurrence is logged at once, later ones in
 * the window are counted and their number is told with the next line logged for that key (a
 * message that comes once a second from every peer stays one line a minute, and nothing is lost).
 */
export class LogLimiter {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(private readonly windowMs: number, private readonly now: () => number = () => performance.now()) {}

  /** Undefined: do not log now. Otherwise log, mentioning `suppressed` (occurrences not logged since the last line). */
  allow(key: string): { suppressed: number } | undefined {
    const now = this.now();
    const entry = this.last.get(key);
    if (entry && now - entry.at < this.windowMs) {
      entry.suppressed += 1;
      return undefined;
    }
    this.last.set(key, { at: now, suppressed: 0 });
    return { suppressed: entry?.suppressed ?? 0 };
  }
}
