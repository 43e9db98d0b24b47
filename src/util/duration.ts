/**
 * Go's time.ParseDuration and Duration.String, so duration flags read and print exactly as the
 * upstream cloud-controller-manager's do ("15s", "1h30m", "300ms"; defaults shown as "5m0s").
 * Values are exchanged in milliseconds; the arithmetic is done in nanoseconds as Go does it.
 */

const NANOS_PER_MS = 1_000_000;
const MAX_NANOS = (1n << 63n) - 1n;

const UNIT_NANOS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  'µs': 1_000n, // U+00B5 micro sign
  'μs': 1_000n, // U+03BC Greek mu
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};
const UNIT_LIST = 'ns, us, µs, ms, s, m, h';

/** Parses a Go duration ("1h30m", "-1.5s", "0") into milliseconds; throws with a Go-like message. */
export function parseGoDuration(text: string): number {
  const invalid = (why?: string) => new Error(`invalid duration ${JSON.stringify(text)}${why ? `: ${why}` : ''}`);
  let s = text;
  let negative = false;
  if (s.startsWith('-') || s.startsWith('+')) {
    negative = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0;
  if (s === '') throw invalid();

  let total = 0n;
  while (s !== '') {
    const number = /^(\d*)(?:\.(\d*))?/.exec(s);
    const whole = number?.[1] ?? '';
    const fraction = number?.[2];
    if (whole === '' && !fraction) throw invalid();
    s = s.slice(number?.[0].length ?? 0);

    const unitMatch = /^[^.\d]+/.exec(s);
    if (!unitMatch) throw invalid('missing unit');
    const unitText = unitMatch[0];
    const unit = UNIT_NANOS[unitText];
    if (unit === undefined) throw invalid(`unknown unit ${JSON.stringify(unitText)} (valid units: ${UNIT_LIST})`);
    s = s.slice(unitText.length);

    let value = BigInt(whole || '0') * unit;
    if (fraction) {
      // As Go: at most 18 fraction digits count, scaled in floating point and truncated.
      const digits = fraction.slice(0, 18);
      value += BigInt(Math.trunc(Number(digits) * (Number(unit) / 10 ** digits.length)));
    }
    total += value;
    if (total > MAX_NANOS + (negative ? 1n : 0n)) throw invalid('out of range');
  }
  const millis = Number(total) / NANOS_PER_MS;
  return negative ? -millis : millis;
}

/** Formats milliseconds like Go's Duration.String(): "15s", "5m0s", "1h30m0s", "300ms", "0s". */
export function formatGoDuration(ms: number): string {
  let nanos = BigInt(Math.round(ms * NANOS_PER_MS));
  const negative = nanos < 0n;
  if (negative) nanos = -nanos;
  const sign = negative ? '-' : '';
  if (nanos === 0n) return '0s';
  if (nanos < 1_000n) return `${sign}${nanos}ns`;
  if (nanos < 1_000_000n) return `${sign}${withFraction(nanos, 3)}µs`;
  if (nanos < 1_000_000_000n) return `${sign}${withFraction(nanos, 6)}ms`;

  const seconds = withFraction(nanos % 60_000_000_000n, 9);
  const totalMinutes = nanos / 60_000_000_000n;
  if (totalMinutes === 0n) return `${sign}${seconds}s`;
  const minutes = totalMinutes % 60n;
  const hours = totalMinutes / 60n;
  return `${sign}${hours > 0n ? `${hours}h` : ''}${minutes}m${seconds}s`;
}

/** value / 10^digits as a decimal without trailing zeros ("1.5", "2"). */
function withFraction(value: bigint, digits: number): string {
  const scale = 10n ** BigInt(digits);
  const fraction = (value % scale).toString().padStart(digits, '0').replace(/0+$/, '');
  return `${value / scale}${fraction ? `.${fraction}` : ''}`;
}
