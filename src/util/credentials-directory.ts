/**
 * `${CREDENTIALS_DIRECTORY}/NAME` in a file path a config names: the file NAME in the directory
 * the environment variable CREDENTIALS_DIRECTORY gives. systemd sets it for a unit with
 * LoadCredential= (the unit's `%d`, e.g. /run/credentials/edge-ccm.service); the shipped
 * Deployment sets it to its Secret volume's mount. So one config names its secrets the same way
 * wherever it runs, and they never sit in a world-readable place.
 *
 * Only this variable, only as the path's first component (`$CREDENTIALS_DIRECTORY/NAME` works
 * too): no general expansion, so no other path changes meaning.
 */

export const CREDENTIALS_DIRECTORY = 'CREDENTIALS_DIRECTORY';

const PREFIX = /^\$(?:\{CREDENTIALS_DIRECTORY\}|CREDENTIALS_DIRECTORY)(?=\/)/;

/** Whether `path` names a file in the credentials directory. */
export function isCredentialPath(path: string): boolean {
  return PREFIX.test(path);
}

/**
 * `path` with its `${CREDENTIALS_DIRECTORY}` replaced by the variable's value; any other path
 * unchanged. Throws when the variable is needed but not set, or not an absolute path.
 */
export function resolveCredentialPath(path: string, env: (name: string) => string | undefined): string {
  if (!isCredentialPath(path)) return path;
  const dir = env(CREDENTIALS_DIRECTORY);
  if (!dir) {
    throw new Error(
      `${CREDENTIALS_DIRECTORY} is not set: systemd sets it for a unit with LoadCredential=, the shipped Deployment to its Secret volume; ` +
        `elsewhere (e.g. edge-ccm validate) set it to the directory holding the files`,
    );
  }
  if (!dir.startsWith('/')) throw new Error(`${CREDENTIALS_DIRECTORY} must be an absolute path (it is ${JSON.stringify(dir)})`);
  return path.replace(PREFIX, dir.replace(/\/+$/, ''));
}
