import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import { loadKubeConfig } from '../../src/app/kubeconfig.ts';
import { BunKubeTransport, type TransportOptions } from '../../src/kube/transport.ts';

/** Kubeconfig files for the test cluster, with everything embedded so the file stands alone. */

export type KubeconfigCredentials = { clientCertPem: string; clientKeyPem: string } | { token: string };

const b64 = (s: string) => Buffer.from(s).toString('base64');

export async function writeKubeconfig(path: string, server: string, caPem: string, userName: string, credentials: KubeconfigCredentials): Promise<string> {
  const user = 'token' in credentials
    ? { token: credentials.token }
    : { 'client-certificate-data': b64(credentials.clientCertPem), 'client-key-data': b64(credentials.clientKeyPem) };
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'edge-ccm-test', cluster: { server, 'certificate-authority-data': b64(caPem) } }],
    users: [{ name: userName, user }],
    contexts: [{ name: userName, context: { cluster: 'edge-ccm-test', user: userName } }],
    'current-context': userName,
  };
  await writeFile(path, stringify(config), { mode: 0o600 });
  return path;
}

/** A transport authenticating as whoever the kubeconfig file says; no client-side rate limit by default. */
export function transportFor(kubeconfigPath: string, options: TransportOptions = { qps: 0 }): BunKubeTransport {
  return new BunKubeTransport(loadKubeConfig({ kubeconfig: kubeconfigPath }), options);
}

/** The bearer token of a token kubeconfig (cp.tokenKubeconfig()), for requests made by hand. */
export function kubeconfigToken(path: string): string {
  const token = readFileSync(path, 'utf8').match(/token: (\S+)/)?.[1];
  if (!token) throw new Error(`no token in ${path}`);
  return token;
}
