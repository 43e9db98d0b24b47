/**
 * The exit codes of edge-ccm, one contract for the controller manager and its subcommands, so a
 * file that `edge-ccm validate` refuses makes the daemon exit with the same code. Printed by
 * --help and written to docs/flags.md.
 */
export const EXIT_OK = 0;
/** Something failed while running: the leader lease lost, a controller ended, a selftest check failed. */
export const EXIT_FAILURE = 1;
/** The input is wrong: a flag, a file a flag names, or the --cloud-config file (as upstream exits 2 on bad flags). */
export const EXIT_INVALID_INPUT = 2;

export const EXIT_CODES: readonly (readonly [code: number, meaning: string])[] = [
  [EXIT_OK, 'success: a clean stop on SIGTERM or SIGINT, a valid file for edge-ccm validate'],
  [EXIT_FAILURE, 'a failure while running (leader lease lost, a controller stopped, a selftest check failed)'],
  [EXIT_INVALID_INPUT, 'invalid input, before anything runs: a bad flag, a missing or unreadable file named by a flag, an invalid --cloud-config (the daemon and edge-ccm validate alike)'],
];
