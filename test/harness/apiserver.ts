import { LoggedProcess } from './processes.ts';
import { waitUntilReady } from './wait.ts';

/**
 * kube-apiserver as a restartable child: the same binary and flags every time, so a restart
 * comes back on the same port with the same certificates, as a real control-plane restart would.
 */
export class ApiServerProcess {
  private proc?: LoggedProcess;

  constructor(
    private readonly binary: string,
    private readonly flags: string[],
    /** Where its apiserver.log and apiserver.pid go. */
    private readonly dir: string,
    private readonly readyz: { url: string; tls: { ca: string; cert: string; key: string } },
    private readonly readyTimeoutMs: number,
  ) {}

  get running(): boolean {
    return this.proc?.running ?? false;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  /** Starts it unless it is running, and waits for /readyz. */
  async start(): Promise<void> {
    if (this.running) return;
    const proc = LoggedProcess.spawn('apiserver', [this.binary, ...this.flags], this.dir);
    this.proc = proc;
    try {
      await waitUntilReady('kube-apiserver', proc, () => this.isReady(), this.readyTimeoutMs);
    } catch (e) {
      await proc.kill();
      throw e;
    }
  }

  /** SIGKILL by pid, as a crash would; waits until the process is gone. */
  async stop(): Promise<void> {
    await this.proc?.kill();
  }

  private async isReady(): Promise<boolean> {
    // keepalive off: a pooled connection to a killed predecessor would fail the first probe.
    const res = await fetch(this.readyz.url, { tls: this.readyz.tls, keepalive: false, signal: AbortSignal.timeout(5000) });
    await res.arrayBuffer();
    return res.ok;
  }
}

/** The files kube-apiserver is started with, all inside the control plane's temp dir. */
export interface ApiServerFiles {
  caCert: string;
  servingCert: string;
  servingKey: string;
  frontProxyCaCert: string;
  frontProxyClientCert: string;
  frontProxyClientKey: string;
  serviceAccountPublicKey: string;
  serviceAccountPrivateKey: string;
  tokenAuthFile: string;
  auditPolicyFile: string;
  auditLogPath: string;
}

export const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';
export const SERVICE_CLUSTER_IP_RANGE = '10.0.0.0/16';
/** The first address of the service range: the `kubernetes` Service, so it is in the serving cert. */
export const KUBERNETES_SERVICE_IP = '10.0.0.1';

export function apiServerFlags(port: number, etcdEndpoint: string, files: ApiServerFiles, extra: string[] = []): string[] {
  return [
    `--etcd-servers=${etcdEndpoint}`,
    `--secure-port=${port}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    '--authorization-mode=Node,RBAC',
    `--client-ca-file=${files.caCert}`,
    `--token-auth-file=${files.tokenAuthFile}`,
    `--tls-cert-file=${files.servingCert}`,
    `--tls-private-key-file=${files.servingKey}`,
    `--service-cluster-ip-range=${SERVICE_CLUSTER_IP_RANGE}`,
    `--service-account-key-file=${files.serviceAccountPublicKey}`,
    `--service-account-signing-key-file=${files.serviceAccountPrivateKey}`,
    `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
    `--api-audiences=${SERVICE_ACCOUNT_ISSUER}`,
    `--audit-policy-file=${files.auditPolicyFile}`,
    `--audit-log-path=${files.auditLogPath}`,
    // Front-proxy (request header) auth, so kube-system/extension-apiserver-authentication is
    // complete, as delegated authentication in a real cluster expects.
    `--requestheader-client-ca-file=${files.frontProxyCaCert}`,
    '--requestheader-allowed-names=front-proxy-client',
    '--requestheader-username-headers=X-Remote-User',
    '--requestheader-group-headers=X-Remote-Group',
    '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    `--proxy-client-cert-file=${files.frontProxyClientCert}`,
    `--proxy-client-key-file=${files.frontProxyClientKey}`,
    // The `kubernetes` Service's endpoints cannot be a loopback address: skip them, not log errors.
    '--endpoint-reconciler-type=none',
    '--enable-priority-and-fairness=false',
    '--allow-privileged=true',
    '--profiling=false',
    ...extra,
  ];
}

export const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  # Service status writes with their bodies, so a test can tell which fields a write set (e.g.
  # that a cutover wrote the finalizer and condition but never the ingress).
  - level: Request
    resources:
      - group: ""
        resources: ["services/status"]
  - level: Metadata
`;
