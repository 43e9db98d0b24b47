import { expect, test } from 'bun:test';
import { SecretFiles } from '../config-file/secrets.ts';
import { isCredentialPath, resolveCredentialPath } from './credentials-directory.ts';

/** `${CREDENTIALS_DIRECTORY}/NAME` in the files a config names (systemd's LoadCredential=, the Deployment's Secret volume). */
const env = (vars: Record<string, string>) => (name: string) => vars[name];

test('only a leading ${CREDENTIALS_DIRECTORY}/ (or $CREDENTIALS_DIRECTORY/) is expanded; every other path is left as written', () => {
  const dir = env({ CREDENTIALS_DIRECTORY: '/run/credentials/edge-ccm.service/' });
  expect(resolveCredentialPath('${CREDENTIALS_DIRECTORY}/pve-token', dir)).toBe('/run/credentials/edge-ccm.service/pve-token');
  expect(resolveCredentialPath('$CREDENTIALS_DIRECTORY/pve-token', dir)).toBe('/run/credentials/edge-ccm.service/pve-token');
  for (const plain of ['/etc/edge-ccm/pve-token', 'relative/file', '/x/${CREDENTIALS_DIRECTORY}/y', '${CREDENTIALS_DIRECTORY}token', '${HOME}/token', '$CREDENTIALS_DIRECTORY_X/token']) {
    expect(isCredentialPath(plain)).toBe(false);
    expect(resolveCredentialPath(plain, dir)).toBe(plain);
  }
  // A plain path needs no variable at all.
  expect(resolveCredentialPath('/etc/edge-ccm/ca.pem', env({}))).toBe('/etc/edge-ccm/ca.pem');
});

test('a credential path without the variable, or with a relative one, is an error that says where the variable comes from', () => {
  expect(() => resolveCredentialPath('${CREDENTIALS_DIRECTORY}/bmc-password', env({}))).toThrow(
    'CREDENTIALS_DIRECTORY is not set: systemd sets it for a unit with LoadCredential=, the shipped Deployment to its Secret volume',
  );
  expect(() => resolveCredentialPath('${CREDENTIALS_DIRECTORY}/bmc-password', env({ CREDENTIALS_DIRECTORY: 'creds' }))).toThrow('CREDENTIALS_DIRECTORY must be an absolute path');
});

test('SecretFiles reads and checks the permissions of the expanded path, and reports the path as the config wrote it', () => {
  const read: string[] = [];
  const checked: string[] = [];
  const files = new SecretFiles({
    readFile: (path) => (read.push(path), 'hunter2\n'),
    permissions: (path) => (checked.push(path), { mode: 0o644, groupIsOwn: false }),
    env: env({ CREDENTIALS_DIRECTORY: '/run/secrets/edge-ccm' }),
  });
  expect(files.read('${CREDENTIALS_DIRECTORY}/bmc-password', 'passwordFile', ['m1'], true)).toBe('hunter2\n');
  expect(read).toEqual(['/run/secrets/edge-ccm/bmc-password']);
  expect(checked).toEqual(['/run/secrets/edge-ccm/bmc-password']);
  expect(files.warnings.map((w) => w.message)).toEqual([expect.stringContaining('passwordFile ${CREDENTIALS_DIRECTORY}/bmc-password is readable by its group and others')]);

  const unset = new SecretFiles({ readFile: (path) => (read.push(path), 'x'), env: env({}) });
  expect(() => unset.read('${CREDENTIALS_DIRECTORY}/bmc-password', 'passwordFile', ['m1'], true)).toThrow('CREDENTIALS_DIRECTORY is not set');
  expect(read).toHaveLength(1); // nothing read from a literal "${CREDENTIALS_DIRECTORY}" directory
});
