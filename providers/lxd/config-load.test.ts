import { expect, test } from 'bun:test';
import { loadLxdConfig } from './config-load.ts';
import { DEFAULT_LXD_SOCKET } from './config-model.ts';

const secrets = (files: Record<string, string>) => ({
  readFile: (path: string) => {
    if (!(path in files)) throw new Error('ENOENT: no such file');
    return files[path]!;
  },
  env: () => undefined,
  mode: () => 0o600,
});

const errors = (text: string, files: Record<string, string> = {}) => {
  const r = loadLxdConfig(text, secrets(files) as never);
  return r.ok ? [] : r.errors.map((e) => `${e.path}${e.line ? ` (line ${e.line})` : ''}: ${e.message}`);
};

test('the default: the LXD unix socket, the default project', () => {
  const r = loadLxdConfig('region: r1\n', secrets({}) as never);
  expect(r.ok && r.config.endpoint).toEqual({ kind: 'unix', socket: DEFAULT_LXD_SOCKET });
  expect(r.ok && r.config.projects).toEqual(['default']);
});

test('HTTPS: client certificate and key read, fingerprint normalised', () => {
  const r = loadLxdConfig('region: r1\nurl: https://lxd1:8443\nclientCertFile: /c.crt\nclientKeyFile: /c.key\nfingerprint: ' + 'ab'.repeat(32) + '\n', secrets({ '/c.crt': 'CERT', '/c.key': 'KEY' }) as never);
  expect(r.ok && r.config.endpoint).toEqual({ kind: 'https', url: 'https://lxd1:8443', clientCert: 'CERT', clientKey: 'KEY', ca: undefined, fingerprint: Array(32).fill('AB').join(':') });
});

test('every problem with its path and line', () => {
  expect(errors('region: r1\nurl: https://lxd1:8443\nsocket: /s\nprojects: [a]\nallProjects: true\ninstanceTypeKey: limits.cpu\n')).toEqual(expect.arrayContaining([
    expect.stringContaining('instanceTypeKey (line 6): must be a user.* config key'),
    expect.stringContaining('socket (line 3): cannot be combined with url'),
    expect.stringContaining('allProjects (line 5): cannot be combined with projects'),
    expect.stringContaining('clientCertFile is required with url'),
    expect.stringContaining('caFile or fingerprint is required with url'),
  ]));
  expect(errors('region: r1\nurl: http://lxd1:8443\nclientCertFile: /missing\nclientKeyFile: /k\nfingerprint: zz\n', { '/k': 'KEY' })).toEqual(expect.arrayContaining([
    expect.stringContaining('url (line 2): must be an https URL'),
    expect.stringContaining('clientCertFile (line 3): cannot read clientCertFile /missing'),
    expect.stringContaining('fingerprint (line 5): must be a SHA-256 fingerprint'),
  ]));
  expect(errors('clientCertFile: /c\n')).toEqual(expect.arrayContaining([expect.stringContaining('region'), expect.stringContaining('url is required with clientCertFile')]));
});
