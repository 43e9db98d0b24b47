/** The benches' `--NAME=VALUE` options, read from the command's own arguments. */
const given = process.argv.slice(2);

/** The value of `--NAME=VALUE`, or undefined when not given. */
export function option(name: string): string | undefined {
  return given.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

/** The value of `--NAME=VALUE`, or `dflt`. */
export function stringOption(name: string, dflt: string): string {
  return option(name) ?? dflt;
}

/** The number `--NAME=N`, or `dflt` (NaN when given and not a number: the bench checks its range). */
export function numberOption(name: string, dflt: number): number {
  return Number(option(name) ?? dflt);
}
