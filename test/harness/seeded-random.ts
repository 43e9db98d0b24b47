/**
 * What the seeded tests (fuzzing, differential mutations) share: a seed taken from an environment
 * variable to replay a run, else a new one (each run prints it), and a small PRNG that gives the
 * same sequence for the same seed.
 */

/** The integer in `variable`, or a fresh random seed when it is unset; anything else is refused, naming the variable. */
export function seedFromEnv(variable: string): number {
  const text = process.env[variable];
  if (text === undefined || text === '') return Math.floor(Math.random() * 2 ** 31);
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new Error(`${variable}=${JSON.stringify(text)}: expected an integer`);
  return n;
}

/** mulberry32: small, fast, uniform enough for test inputs, and the same sequence for the same seed. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
