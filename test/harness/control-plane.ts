import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAlreadyExists } from '../../src/kube/errors.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { AUDIT_POLICY, KUBERNETES_SERVICE_IP, ApiServerProcess, apiServerFlags } from './apiserver.ts';
import { controlPlaneBinaries, controlPlaneBinDir } from './binaries.ts';
import { type CertificateAuthority, createCertificateAuthority, createSigningKeyPair, issueCertificate } from './certs.ts';
import { EtcdServer } from './etcd.ts';
import { transportFor, writeKubeconfig } from './kubeconfig.ts';
import { freeLoopbackPorts } from './ports.ts';
import { ownDir, removeOwnedDir } from './processes.ts';

/**
 * A real etcd and kube-apiserver on loopback for integration tests: its own PKI, static tokens,
 * service-account signing, an audit log, all in one temp dir that stop() removes.
 */

export { controlPlaneBinDir };

export interface ControlPlane {
  server: string;                 // https://127.0.0.1:PORT
  caFile: string; caPem: string;
  dir: string;                    // temp dir holding certs, kubeconfigs, logs (etcd.log, apiserver.log, audit.log)
  adminKubeconfig: string;        // path; client cert CN=admin, O=system:masters
  auditLogPath: string;           // API server audit log (JSON lines, level Metadata for all requests)
  /** Writes a kubeconfig authenticating with a fresh client certificate (CN=user, O=each group), signed by the cluster CA. */
  clientCertKubeconfig(user: string, groups?: string[]): Promise<string>;
  /** A kubeconfig authenticating with a static bearer token configured in --token-auth-file (user "token-user", group "system:masters" — and a second token for user "token-viewer" with no groups). */
  tokenKubeconfig(which?: 'admin' | 'viewer'): string;
  /** Creates a ServiceAccount and returns a token for it via the TokenRequest API (for in-cluster style tests). */
  serviceAccountToken(namespace: string, name: string): Promise<string>;
  restartApiServer(): Promise<void>;   // SIGKILL kube-apiserver by pid and start it again on the same port, wait for /readyz
  stopApiServer(): Promise<void>; startApiServer(): Promise<void>;
  /**
   * Compacts etcd to its current revision, so old resourceVersions give 410 Gone on watch. Then
   * restarts kube-apiserver (as restartApiServer): its watch cache keeps serving events etcd has
   * compacted away, and only a cache rebuilt from the current revision answers 410 for older
   * ones. Open watches are cut, as by a real API server restart.
   */
  compactEtcd(): Promise<void>;
  /** etcd's pid, for tests that pause it (SIGSTOP/SIGCONT) as a stalled disk or a GC pause would. */
  etcdPid(): number;
  stop(): Promise<void>;               // kills what it started (by pid), removes the temp dir
}

/** Generous: the machine may have 2 cores and a Go build running beside the tests. */
const READY_TIMEOUT_MS = 180_000;

/**
 * Ports are picked free, then bound seconds later by etcd and kube-apiserver: another process may
 * take one meanwhile. Such a start is thrown away and tried again on new ports.
 */
const LAUNCH_ATTEMPTS = 3;
const PORT_TAKEN = /address already in use|bind: /i;

export interface ControlPlaneOptions {
  /**
   * More kube-apiserver flags; a function is given the PKI made for this start (the cluster CA,
   * its dir), e.g. to issue the API server a kubelet client certificate.
   */
  extraApiServerFlags?: string[] | ((pki: { ca: CertificateAuthority; dir: string }) => Promise<string[]>);
}

export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(opts);
    } catch (e) {
      if (attempt >= LAUNCH_ATTEMPTS || !PORT_TAKEN.test(e instanceof Error ? e.message : String(e))) throw e;
      console.warn(`control plane: a port was taken before it was bound; starting again on new ports (attempt ${attempt + 1})`);
    }
  }
}

async function launch(opts: ControlPlaneOptions): Promise<LocalControlPlane> {
  const binaries = controlPlaneBinaries(); // fails with the install hint before anything is created
  const dir = await mkdtemp(join(tmpdir(), 'edge-ccm-control-plane-'));
  ownDir(dir);
  let etcdStarted: Promise<EtcdServer> | undefined;
  try {
    const [etcdClientPort, etcdPeerPort, apiPort] = (await freeLoopbackPorts(3)) as [number, number, number];
    // etcd needs no certificates: start it while the PKI is made.
    etcdStarted = EtcdServer.start(binaries.etcd, dir, etcdClientPort, etcdPeerPort, READY_TIMEOUT_MS);
    const pkiDir = join(dir, 'pki');
    await mkdir(pkiDir);
    const [ca, frontProxyCa, serviceAccountKey] = await Promise.all([
      createCertificateAuthority(pkiDir, 'ca', 'edge-ccm-test-ca'),
      createCertificateAuthority(pkiDir, 'front-proxy-ca', 'edge-ccm-test-front-proxy-ca'),
      createSigningKeyPair(pkiDir, 'service-account'),
    ]);
    const [serving, admin, frontProxyClient] = await Promise.all([
      issueCertificate(ca, pkiDir, 'apiserver', {
        commonName: 'kube-apiserver', usage: 'server',
        dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc'],
        ipAddresses: ['127.0.0.1', KUBERNETES_SERVICE_IP],
      }),
      issueCertificate(ca, pkiDir, 'admin', { commonName: 'admin', organizations: ['system:masters'], usage: 'client' }),
      issueCertificate(frontProxyCa, pkiDir, 'front-proxy-client', { commonName: 'front-proxy-client', usage: 'client' }),
    ]);
    const tokens = { admin: crypto.randomUUID(), viewer: crypto.randomUUID() };
    const tokenAuthFile = join(dir, 'tokens.csv');
    // token,user,uid,"group1,group2"
    await writeFile(tokenAuthFile, `${tokens.admin},token-user,token-user-uid,"system:masters"\n${tokens.viewer},token-viewer,token-viewer-uid\n`, { mode: 0o600 });
    const auditPolicyFile = join(dir, 'audit-policy.yaml');
    await writeFile(auditPolicyFile, AUDIT_POLICY);
    const auditLogPath = join(dir, 'audit.log');

    const server = `https://127.0.0.1:${apiPort}`;
    const extraFlags = typeof opts.extraApiServerFlags === 'function' ? await opts.extraApiServerFlags({ ca, dir: pkiDir }) : opts.extraApiServerFlags;
    const apiServer = new ApiServerProcess(
      binaries['kube-apiserver'],
      apiServerFlags(apiPort, (await etcdStarted).endpoint, {
        caCert: ca.certPath,
        servingCert: serving.certPath,
        servingKey: serving.keyPath,
        frontProxyCaCert: frontProxyCa.certPath,
        frontProxyClientCert: frontProxyClient.certPath,
        frontProxyClientKey: frontProxyClient.keyPath,
        serviceAccountPublicKey: serviceAccountKey.publicKeyPath,
        serviceAccountPrivateKey: serviceAccountKey.privateKeyPath,
        tokenAuthFile,
        auditPolicyFile,
        auditLogPath,
      }, extraFlags),
      dir,
      { url: `${server}/readyz`, tls: { ca: ca.certPem, cert: admin.certPem, key: admin.keyPem } },
      READY_TIMEOUT_MS,
    );
    await apiServer.start();

    const kubeconfigDir = join(dir, 'kubeconfigs');
    await mkdir(kubeconfigDir);
    const [adminKubeconfig, tokenAdminKubeconfig, tokenViewerKubeconfig] = await Promise.all([
      writeKubeconfig(join(kubeconfigDir, 'admin.yaml'), server, ca.certPem, 'admin', { clientCertPem: admin.certPem, clientKeyPem: admin.keyPem }),
      writeKubeconfig(join(kubeconfigDir, 'token-user.yaml'), server, ca.certPem, 'token-user', { token: tokens.admin }),
      writeKubeconfig(join(kubeconfigDir, 'token-viewer.yaml'), server, ca.certPem, 'token-viewer', { token: tokens.viewer }),
    ]);
    return new LocalControlPlane({
      server, dir, ca, auditLogPath, adminKubeconfig, kubeconfigDir,
      tokenKubeconfigs: { admin: tokenAdminKubeconfig, viewer: tokenViewerKubeconfig },
      etcd: await etcdStarted, apiServer,
    });
  } catch (e) {
    await etcdStarted?.then((etcd) => etcd.stop(), () => undefined);
    removeOwnedDir(dir);
    throw e;
  }
}

interface Parts {
  server: string;
  dir: string;
  ca: CertificateAuthority;
  auditLogPath: string;
  adminKubeconfig: string;
  kubeconfigDir: string;
  tokenKubeconfigs: { admin: string; viewer: string };
  etcd: EtcdServer;
  apiServer: ApiServerProcess;
}

class LocalControlPlane implements ControlPlane {
  readonly server: string;
  readonly caFile: string;
  readonly caPem: string;
  readonly dir: string;
  readonly adminKubeconfig: string;
  readonly auditLogPath: string;
  stopped = false;
  private clientCerts = 0;
  private adminTransport?: KubeTransport;

  constructor(private readonly parts: Parts) {
    this.server = parts.server;
    this.caFile = parts.ca.certPath;
    this.caPem = parts.ca.certPem;
    this.dir = parts.dir;
    this.adminKubeconfig = parts.adminKubeconfig;
    this.auditLogPath = parts.auditLogPath;
  }

  async clientCertKubeconfig(user: string, groups: string[] = []): Promise<string> {
    // A counter, not the user name, names the files: user names may hold ':' or '/'.
    const name = `client-${++this.clientCerts}`;
    const cert = await issueCertificate(this.parts.ca, join(this.dir, 'pki'), name, { commonName: user, organizations: groups, usage: 'client' });
    return writeKubeconfig(join(this.parts.kubeconfigDir, `${name}.yaml`), this.server, this.caPem, user, { clientCertPem: cert.certPem, clientKeyPem: cert.keyPem });
  }

  tokenKubeconfig(which: 'admin' | 'viewer' = 'admin'): string {
    return this.parts.tokenKubeconfigs[which];
  }

  async serviceAccountToken(namespace: string, name: string): Promise<string> {
    const api = (this.adminTransport ??= transportFor(this.adminKubeconfig));
    await createIfMissing(api, '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
    const serviceAccounts = `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts`;
    await createIfMissing(api, serviceAccounts, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name } });
    const review = await api.request<{ status: { token: string } }>({
      method: 'POST',
      path: `${serviceAccounts}/${encodeURIComponent(name)}/token`,
      // No audiences: the token is for the API server's own (--api-audiences).
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
    });
    return review.status.token;
  }

  async restartApiServer(): Promise<void> {
    await this.parts.apiServer.stop();
    await this.parts.apiServer.start();
  }

  stopApiServer(): Promise<void> {
    return this.parts.apiServer.stop();
  }

  startApiServer(): Promise<void> {
    return this.parts.apiServer.start();
  }

  async compactEtcd(): Promise<void> {
    await this.parts.etcd.compact();
    await this.restartApiServer();
  }

  etcdPid(): number {
    return this.parts.etcd.pid;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.parts.apiServer.stop();
    await this.parts.etcd.stop();
    removeOwnedDir(this.dir);
  }
}

async function createIfMissing(api: KubeTransport, collection: string, obj: unknown): Promise<void> {
  try {
    await api.request({ method: 'POST', path: collection, body: obj });
  } catch (e) {
    if (!isAlreadyExists(e)) throw e;
  }
}

let shared: Promise<LocalControlPlane> | undefined;

/** One control plane shared by a whole test run: started lazily on first call, stopped at process exit (and on SIGINT/SIGTERM). */
export async function sharedControlPlane(): Promise<ControlPlane> {
  // Exit-time cleanup is the process registry's job (see processes.ts): SIGKILL by pid, rm -r.
  if (shared && (await shared.catch(() => undefined))?.stopped) shared = undefined;
  shared ??= launch({}).catch((e: unknown) => {
    shared = undefined; // let a later call try again rather than replay the failure
    throw e;
  });
  return shared;
}
