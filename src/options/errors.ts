import { EXIT_INVALID_INPUT } from './exit-codes.ts';

/** Every problem found on the command line, each naming its flag; the caller prints them and exits 2. */
export interface FlagError {
  /** The flag as written on a command line, e.g. "--node-monitor-period" or "--foo" for an unknown one. */
  flag: string;
  message: string;
}

export class FlagErrors extends Error {
  override readonly name = 'FlagErrors';
  readonly errors: readonly FlagError[];

  constructor(errors: readonly FlagError[]) {
    super(errors.map(formatFlagError).join('\n'));
    this.errors = errors;
  }
}

export function formatFlagError(error: FlagError): string {
  return `${error.flag}: ${error.message}`;
}

/** Exit code for a bad command line (ccm-contract section 1): invalid input, see exit-codes.ts. */
export const FLAG_ERROR_EXIT_CODE = EXIT_INVALID_INPUT;
