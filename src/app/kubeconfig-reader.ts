import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { parse } from 'yaml';
import type { ClientRequestOptions, KubeClientConfig } from '../kube/transport.ts';
import { SERVICE_ACCOUNT_DIR, inClusterServer, kubeconfigSource } from './kubeconfig-source.ts';

/**
 * The kubeconfig reader of the per-node processes (`edge-ccm speaker`): clusters, users, contexts
 * and current-context, as client-go reads them, without client-node, whose KubeConfig module
 * alone loads client-node's generated API (765 modules; issue 38, BENCHMARKS.md "Footprint on
 * every node"). It covers what a node's credentials are: a CA (file or data), a client certificate
 * and key (file or data), a token, a tokenFile and the in-cluster service account (both re-read
 * at each credential refresh, so rotated tokens are followed), basic auth, `as`,
 * insecure-skip-tls-verify and tls-server-name. Credential plugins (exec, auth-provider) and
 * proxy-url are refused, naming the field: the controller manager, on client-node, runs plugins.
 * Messages name the file and the field, never a value.
 */

interface Cluster {
  server: string;
  ca?: Material;
  insecure: boolean;
  tlsServerName?: string;
}

interface User {
  cert?: Material;
  key?: Material;
  token?: string;
  tokenFile?: string;
  basic?: string;
  impersonate?: string;
}

/** PEM (or a token) inline, or in a file re-read at each refresh (certificate rotation). */
type Material = { data: Buffer } | { file: string };

export class KubeconfigCredentials implements KubeClientConfig {
  constructor(
    private readonly cluster: Cluster,
    private readonly user: User,
  ) {}

  getCurrentCluster(): { server: string } {
    return { server: this.cluster.server };
  }

  async applyToHTTPSOptions(opts: ClientRequestOptions): Promise<void> {
    const { cluster, user } = this;
    if (cluster.insecure) opts.rejectUnauthorized = false;
    if (cluster.tlsServerName) opts.servername = cluster.tlsServerName;
    if (cluster.ca) opts.ca = read(cluster.ca);
    if (user.cert) opts.cert = read(user.cert);
    if (user.key) opts.key = read(user.key);
    const headers: Record<string, string> = (opts.headers ??= {});
    if (user.impersonate) headers['Impersonate-User'] = user.impersonate;
    // As client-go: the token file's content, re-read, wins over an inline token.
    const token = user.tokenFile ? readFileSync(user.tokenFile, 'utf8').trim() : user.token;
    if (token) headers.Authorization = `Bearer ${token}`;
    if (user.basic) opts.auth = user.basic;
  }
}

const read = (m: Material): Buffer => ('data' in m ? m.data : readFileSync(m.file));

/**
 * The client configuration of a per-node process: the file --kubeconfig names, else the
 * in-cluster service account, else the default locations (src/app/kubeconfig-source.ts).
 * `serviceAccountDir` is for tests.
 */
export function readKubeconfig(opts: { kubeconfig?: string; flag?: string }, env: NodeJS.ProcessEnv = process.env, serviceAccountDir = SERVICE_ACCOUNT_DIR): KubeconfigCredentials {
  const source = kubeconfigSource(opts, env);
  switch (source.kind) {
    case 'file':
      return fromFiles([source.path], source.flag);
    case 'default':
      return fromFiles(source.paths, env.KUBECONFIG ? 'KUBECONFIG' : 'kubeconfig');
    case 'in-cluster': {
      const ca = join(serviceAccountDir, 'ca.crt');
      const tokenFile = join(serviceAccountDir, 'token');
      for (const [what, path] of [['CA', ca], ['token', tokenFile]] as const) {
        try {
          readFileSync(path);
        } catch (e) {
          throw new Error(`in-cluster service account: cannot read its ${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
        }
      }
      return new KubeconfigCredentials({ server: inClusterServer(source.host, source.port), ca: { file: ca }, insecure: false }, { tokenFile });
    }
    case 'master':
      throw new Error('no kubeconfig: --master alone is not read here'); // no per-node process has --master
  }
}

type Entry = Record<string, unknown>;

/** The files merged as client-go merges KUBECONFIG: the first file to name an entry (or the current context) wins. */
function fromFiles(paths: string[], flag: string): KubeconfigCredentials {
  const clusters = new Map<string, { entry: Entry; where: string; dir: string }>();
  const users = new Map<string, { entry: Entry; where: string; dir: string }>();
  const contexts = new Map<string, { entry: Entry; where: string }>();
  let current: { name: string; file: string } | undefined;
  for (const path of paths) {
    const doc = parseFile(path, flag);
    const where = `${flag}: ${path}`;
    const dir = dirname(path);
    if (doc['current-context'] !== undefined && doc['current-context'] !== '') {
      if (typeof doc['current-context'] !== 'string') throw new Error(`${where}: current-context: must be a string`);
      current ??= { name: doc['current-context'], file: path };
    }
    for (const [list, into, inner] of [['clusters', clusters, 'cluster'], ['users', users, 'user'], ['contexts', contexts, 'context']] as const) {
      const items = doc[list];
      if (items === undefined || items === null) continue;
      if (!Array.isArray(items)) throw new Error(`${where}: ${list}: must be a list`);
      items.forEach((item, i) => {
        if (!isMap(item) || typeof item.name !== 'string' || item.name === '') throw new Error(`${where}: ${list}[${i}].name: missing`);
        const body = item[inner] ?? {};
        if (!isMap(body)) throw new Error(`${where}: ${list}[${i}].${inner}: must be a mapping`);
        if (!into.has(item.name)) (into as Map<string, unknown>).set(item.name, { entry: body, where: `${where}: ${list}[${i}] (${item.name}).${inner}`, dir });
      });
    }
  }
  const files = paths.join(', ');
  if (!current) throw new Error(`${flag}: ${files}: current-context: not set`);
  const context = contexts.get(current.name);
  if (!context) throw new Error(`${flag}: ${current.file}: current-context: ${JSON.stringify(current.name)} is not in contexts`);
  const clusterName = context.entry.cluster;
  const userName = context.entry.user;
  if (typeof clusterName !== 'string' || !clusterName) throw new Error(`${context.where}.cluster: missing`);
  const cluster = clusters.get(clusterName);
  if (!cluster) throw new Error(`${context.where}.cluster: ${JSON.stringify(clusterName)} is not in clusters`);
  // A context without a user is anonymous, as client-go.
  let user: { entry: Entry; where: string; dir: string } | undefined;
  if (userName !== undefined && userName !== '') {
    if (typeof userName !== 'string') throw new Error(`${context.where}.user: must be a string`);
    user = users.get(userName);
    if (!user) throw new Error(`${context.where}.user: ${JSON.stringify(userName)} is not in users`);
  }
  return new KubeconfigCredentials(readCluster(cluster), user ? readUser(user) : {});
}

function parseFile(path: string, flag: string): Entry {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`${flag}: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  let doc: unknown;
  try {
    // prettyErrors off: the message gives the line, not an excerpt of it (which could hold a token).
    doc = parse(text, { prettyErrors: false, logLevel: 'error' });
  } catch (e) {
    throw new Error(`${flag}: ${path}: not valid YAML: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (doc === null || doc === undefined) return {};
  if (!isMap(doc)) throw new Error(`${flag}: ${path}: not a kubeconfig (a mapping with clusters, users, contexts)`);
  return doc;
}

function readCluster({ entry, where, dir }: { entry: Entry; where: string; dir: string }): Cluster {
  if (entry['proxy-url'] !== undefined) throw new Error(`${where}.proxy-url: not supported: the per-node processes connect to the API server directly`);
  const server = entry.server;
  if (typeof server !== 'string' || server === '') throw new Error(`${where}.server: missing`);
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new Error(`${where}.server: not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`${where}.server: must be https:// or http://`);
  const insecure = entry['insecure-skip-tls-verify'];
  if (insecure !== undefined && typeof insecure !== 'boolean') throw new Error(`${where}.insecure-skip-tls-verify: must be true or false`);
  const tlsServerName = optionalString(entry, 'tls-server-name', where);
  return {
    server: server.replace(/\/+$/, ''),
    ca: material(entry, 'certificate-authority', where, dir),
    insecure: insecure === true,
    ...(tlsServerName ? { tlsServerName } : {}),
  };
}

function readUser({ entry, where, dir }: { entry: Entry; where: string; dir: string }): User {
  for (const plugin of ['exec', 'auth-provider'] as const) {
    if (entry[plugin] !== undefined && entry[plugin] !== null) {
      throw new Error(`${where}.${plugin}: credential plugins are not supported by the per-node processes: give a token, tokenFile or client certificate (edge-ccm run, the controller manager, runs plugins)`);
    }
  }
  for (const field of ['as-uid', 'as-groups', 'as-user-extra'] as const) {
    if (entry[field] !== undefined && entry[field] !== null) throw new Error(`${where}.${field}: not supported (only as, the impersonated user)`);
  }
  const cert = material(entry, 'client-certificate', where, dir);
  const key = material(entry, 'client-key', where, dir);
  if (!!cert !== !!key) throw new Error(`${where}: ${cert ? 'client-certificate' : 'client-key'} given without ${cert ? 'client-key' : 'client-certificate'}`);
  const token = optionalString(entry, 'token', where);
  // client-go's field is tokenFile; client-node read token-file, which is kept for the files written for it.
  const tokenFileField = entry.tokenFile !== undefined ? 'tokenFile' : 'token-file';
  const tokenFilePath = optionalString(entry, tokenFileField, where);
  const tokenFile = tokenFilePath ? absolute(dir, tokenFilePath) : undefined;
  if (tokenFile) readable(tokenFile, `${where}.${tokenFileField}`);
  const username = optionalString(entry, 'username', where);
  const password = optionalString(entry, 'password', where);
  if ((username || password) && (token || tokenFile)) throw new Error(`${where}: username/password and a token are both set: give one`);
  const impersonate = optionalString(entry, 'as', where);
  return {
    ...(cert ? { cert } : {}),
    ...(key ? { key } : {}),
    ...(token ? { token: token.trim() } : {}),
    ...(tokenFile ? { tokenFile } : {}),
    ...(username || password ? { basic: `${username ?? ''}:${password ?? ''}` } : {}),
    ...(impersonate ? { impersonate } : {}),
  };
}

/** FIELD (a file, relative to the kubeconfig's folder) or FIELD-data (base64); the data wins, as client-go. */
function material(entry: Entry, field: string, where: string, dir: string): Material | undefined {
  const data = optionalString(entry, `${field}-data`, where);
  if (data) {
    const compact = data.replace(/\s+/g, '');
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 === 1) throw new Error(`${where}.${field}-data: not base64`);
    return { data: Buffer.from(compact, 'base64') };
  }
  const file = optionalString(entry, field, where);
  if (!file) return undefined;
  const path = absolute(dir, file);
  readable(path, `${where}.${field}`);
  return { file: path };
}

function readable(path: string, field: string): void {
  try {
    readFileSync(path);
  } catch (e) {
    throw new Error(`${field}: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
}

function optionalString(entry: Entry, field: string, where: string): string | undefined {
  const value = entry[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new Error(`${where}.${field}: must be a string`);
  return value;
}

const absolute = (dir: string, file: string): string => (isAbsolute(file) ? file : join(dir, file));
const isMap = (x: unknown): x is Entry => typeof x === 'object' && x !== null && !Array.isArray(x);
