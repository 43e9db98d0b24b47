import { afterAll, describe, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import type { ClientRequestOptions } from '../kube/transport.ts';
import { readKubeconfig } from './kubeconfig-reader.ts';

const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-kubeconfig-reader-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const CA = '-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n';
const CERT = '-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----\n';
const KEY = '-----BEGIN EC PRIVATE KEY-----\nKEY\n-----END EC PRIVATE KEY-----\n';
const SECRET = 'tok-3f9a1c-not-to-be-printed';
const b64 = (s: string) => Buffer.from(s).toString('base64');
let n = 0;

function file(text: string, name = `kc-${++n}.yaml`): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** A kubeconfig with one cluster, one user and the context joining them. */
function kubeconfig(cluster: Record<string, unknown>, user: Record<string, unknown>, extra = ''): string {
  return file([
    'apiVersion: v1', 'kind: Config', 'current-context: c',
    `clusters: [{name: k, cluster: ${JSON.stringify({ server: 'https://198.51.100.7:6443/', ...cluster })}}]`,
    `users: [{name: u, user: ${JSON.stringify(user)}}]`,
    'contexts: [{name: c, context: {cluster: k, user: u}}]', extra,
  ].join('\n'));
}

async function options(path: string): Promise<ClientRequestOptions> {
  const opts: ClientRequestOptions = {};
  await readKubeconfig({ kubeconfig: path }).applyToHTTPSOptions(opts);
  return opts;
}

/** What client-node's KubeConfig (the reader the speaker used before) makes of the same file. */
async function clientNodeOptions(path: string): Promise<ClientRequestOptions> {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  const opts: ClientRequestOptions & { agent?: unknown } = {};
  await kc.applyToHTTPSOptions(opts);
  delete opts.agent; // client-node's own https.Agent: the transport reads only the rest
  return opts;
}

function failure(path: string, env?: NodeJS.ProcessEnv): string {
  try {
    readKubeconfig(path ? { kubeconfig: path } : {}, env);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('read without an error');
}

describe('the same credentials as client-node read from the same file', () => {
  const caFile = file(CA, 'ca.crt');
  file(CERT, 'client.crt');
  const keyFile = file(KEY, 'client.key');
  const cases: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ['embedded CA, client certificate and key', { 'certificate-authority-data': b64(CA) }, { 'client-certificate-data': b64(CERT), 'client-key-data': b64(KEY) }],
    ['files, relative to the kubeconfig', { 'certificate-authority': 'ca.crt' }, { 'client-certificate': 'client.crt', 'client-key': keyFile }],
    ['a token, TLS unverified, another server name', { 'certificate-authority': caFile, 'insecure-skip-tls-verify': true, 'tls-server-name': 'api.example' }, { token: SECRET }],
    ['basic auth and impersonation', { 'certificate-authority-data': b64(CA) }, { username: 'admin', password: SECRET, as: 'system:node:n1' }],
    ['a user with nothing (anonymous)', {}, {}],
  ];
  for (const [name, cluster, user] of cases) {
    test(name, async () => {
      const path = kubeconfig(cluster, user);
      const ours = await options(path);
      expect(ours).toEqual(await clientNodeOptions(path));
      expect(readKubeconfig({ kubeconfig: path }).getCurrentCluster()).toEqual({ server: 'https://198.51.100.7:6443' });
    });
  }
});

describe('tokens that rotate are re-read at each refresh', () => {
  test('tokenFile (client-go), relative to the kubeconfig; it wins over an inline token', async () => {
    const tokenPath = file('first\n', 'token-a');
    const kc = readKubeconfig({ kubeconfig: kubeconfig({}, { tokenFile: 'token-a', token: 'inline' }) });
    const first: ClientRequestOptions = {};
    await kc.applyToHTTPSOptions(first);
    expect(first.headers).toEqual({ Authorization: 'Bearer first' });
    writeFileSync(tokenPath, 'second');
    const second: ClientRequestOptions = {};
    await kc.applyToHTTPSOptions(second);
    expect(second.headers).toEqual({ Authorization: 'Bearer second' });
  });

  test('the in-cluster service account: its CA, its token as it rotates, the server from the environment (IPv6 bracketed)', async () => {
    const sa = join(dir, 'serviceaccount');
    mkdirSync(sa);
    writeFileSync(join(sa, 'ca.crt'), CA);
    writeFileSync(join(sa, 'token'), 'sa-1');
    const kc = readKubeconfig({}, { KUBERNETES_SERVICE_HOST: '2001:db8::1', KUBERNETES_SERVICE_PORT: '443' }, sa);
    expect(kc.getCurrentCluster()).toEqual({ server: 'https://[2001:db8::1]:443' });
    const first: ClientRequestOptions = {};
    await kc.applyToHTTPSOptions(first);
    expect(first).toEqual({ ca: Buffer.from(CA), headers: { Authorization: 'Bearer sa-1' } });
    writeFileSync(join(sa, 'token'), 'sa-2');
    const second: ClientRequestOptions = {};
    await kc.applyToHTTPSOptions(second);
    expect(second.headers).toEqual({ Authorization: 'Bearer sa-2' });
  });

  test('in-cluster without the service account files says which file', () => {
    expect(() => readKubeconfig({}, { KUBERNETES_SERVICE_HOST: '198.51.100.1', KUBERNETES_SERVICE_PORT: '443' }, join(dir, 'nothing-here'))).toThrow(
      `in-cluster service account: cannot read its CA ${join(dir, 'nothing-here', 'ca.crt')}: ENOENT`,
    );
  });
});

test('KUBECONFIG: files merged as client-go, the first to name an entry or the current context wins', async () => {
  const a = file(['current-context: first', 'users: [{name: u, user: {token: from-a}}]', 'contexts: [{name: first, context: {cluster: k, user: u}}]'].join('\n'));
  const b = file(['current-context: second', `clusters: [{name: k, cluster: {server: "https://198.51.100.9"}}]`, 'users: [{name: u, user: {token: from-b}}]'].join('\n'));
  const kc = readKubeconfig({}, { KUBECONFIG: `${join(dir, 'missing')}:${a}:${b}` });
  const opts: ClientRequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  expect(kc.getCurrentCluster()).toEqual({ server: 'https://198.51.100.9' });
  expect(opts.headers).toEqual({ Authorization: 'Bearer from-a' });
});

describe('bad input: a message naming the file and the field, never a secret', () => {
  const cases: [string, () => string, string][] = [
    ['an exec plugin', () => kubeconfig({}, { exec: { command: 'get-token', apiVersion: 'client.authentication.k8s.io/v1' } }), '(u).user.exec: credential plugins are not supported'],
    ['an auth-provider plugin', () => kubeconfig({}, { 'auth-provider': { name: 'oidc', config: { 'id-token': SECRET } } }), '(u).user.auth-provider: credential plugins are not supported'],
    ['a proxy', () => kubeconfig({ 'proxy-url': 'socks5://198.51.100.2:1080' }, { token: SECRET }), '(k).cluster.proxy-url: not supported'],
    ['a certificate without its key', () => kubeconfig({}, { 'client-certificate-data': b64(CERT) }), '(u).user: client-certificate given without client-key'],
    ['data that is not base64', () => kubeconfig({}, { 'client-certificate-data': `${SECRET}!`, 'client-key-data': b64(KEY) }), '(u).user.client-certificate-data: not base64'],
    ['a CA file that is not there', () => kubeconfig({ 'certificate-authority': 'nope.crt' }, { token: SECRET }), `(k).cluster.certificate-authority: cannot read ${join(dir, 'nope.crt')}: ENOENT`],
    ['a token and a password', () => kubeconfig({}, { token: SECRET, username: 'a', password: SECRET }), '(u).user: username/password and a token are both set'],
    ['insecure-skip-tls-verify as a string', () => kubeconfig({ 'insecure-skip-tls-verify': 'yes' }, {}), '(k).cluster.insecure-skip-tls-verify: must be true or false'],
    ['a server that is not https or http', () => kubeconfig({ server: 'ftp://198.51.100.7' }, {}), '(k).cluster.server: must be https:// or http://'],
    ['a server that is not a URL', () => kubeconfig({ server: 'not a url' }, {}), '(k).cluster.server: not a URL'],
    ['no current-context', () => file(`users: [{name: u, user: {token: ${SECRET}}}]`), ': current-context: not set'],
    ['a current-context not in contexts', () => file(`current-context: gone\nusers: [{name: u, user: {token: ${SECRET}}}]`), 'current-context: "gone" is not in contexts'],
    ['a context naming a missing user', () => file(['current-context: c', 'clusters: [{name: k, cluster: {server: "https://198.51.100.7"}}]', 'contexts: [{name: c, context: {cluster: k, user: nobody}}]'].join('\n')), '(c).context.user: "nobody" is not in users'],
    ['not YAML', () => file(`users: [{name: u, user: {token: ${SECRET}}\n  - : :`), 'not valid YAML'],
    ['not a mapping', () => file(`- ${SECRET}`), 'not a kubeconfig'],
  ];
  for (const [name, make, expected] of cases) {
    test(name, () => {
      const path = make();
      const message = failure(path);
      expect(message).toContain(expected);
      expect(message).toContain(path);
      expect(message).not.toContain(SECRET);
    });
  }

  test('nothing given, not in a cluster, no default file: says what was looked for', () => {
    expect(failure('', { HOME: join(dir, 'no-home') })).toContain(`KUBECONFIG not set, ${join(dir, 'no-home', '.kube', 'config')} not found, and not in a cluster`);
    expect(failure('', { KUBECONFIG: join(dir, 'none.yaml') })).toBe(`KUBECONFIG: none of its files exists (${join(dir, 'none.yaml')})`);
  });

  test('a --kubeconfig that is not there', () => {
    expect(failure(join(dir, 'absent.yaml'))).toBe(`--kubeconfig: file ${join(dir, 'absent.yaml')} does not exist`);
  });
});
