import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AUDIT_POLICY, KUBERNETES_SERVICE_IP, apiServerFlags } from './apiserver.ts';
import { ROUTER4, ROUTER_ASN, SPEAKER_ASN, startRouter, type BgpRouter } from './bgp-lab.ts';
import { controlPlaneBinaries } from './binaries.ts';
import { ccmBinaryCommand } from './ccm-process.ts';
import { createCertificateAuthority, createSigningKeyPair, issueCertificate } from './certs.ts';
import { eventually } from './eventually.ts';
import { L2Lab, NODES, type NodeName } from './l2-lab.ts';
import type { LoggedProcess } from './processes.ts';
import { kubeVipCommand } from './kube-vip.ts';

/**
 * Three control-plane hosts for `edge-ccm vip` (issue 28) on harness/l2-lab.ts's switch: each
 * node runs its own kube-apiserver (0.0.0.0:6443, so on 127.0.0.1, its lan address and the VIP
 * on its loopback), all sharing one etcd in the client's namespace (on the lan: it survives
 * every fault of a node), and the compiled binary's `vip` mode with one config and key.
 *
 * Built with `router: true`, the lab's "rtr" namespace (198.51.100.1 on the lan) runs BIRD with a
 * BGP and a BFD session to each host, for `announce: bgp` (the second config, VIP_BGP): BIRD puts
 * the holder's host route in rtr's kernel table, and the client reaches VIP_BGP through rtr (a
 * /32 route; no redirects, so every request takes the router's current path).
 */
export const VIP = '198.51.100.10';
export const VIP6 = '2001:db8:1::10';
/** What the hosts rank over: the section's addresses, as edge-ccm vip joins them. */
export const VIP_KEY = `${VIP},${VIP6}`;
export const API_PORT = 6443;
/** The VIP of `announce: bgp` (routed: on no segment), and what the hosts rank over for it. */
export const VIP_BGP = '203.0.113.250';
export const VIP_BGP_KEY = VIP_BGP;
/** BFD of the hosts' sessions (both sides). */
const BFD = { intervalMs: 200, multiplier: 3 };
/** Each host's `edge-ccm vip` serves /metrics and /readyz here, inside its own namespace. */
const VIP_METRICS_PORT = 7473;
const ETCD = 'http://198.51.100.99:2379';
/** What systemd gives a unit's processes for PATH (its compiled-in default, no Environment= of ours sets it). */
const SYSTEMD_DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin';

export class VipLab {
  readonly apiServers = new Map<NodeName, LoggedProcess>();
  readonly vips = new Map<NodeName, LoggedProcess>();
  private flags: (node: NodeName) => string[] = () => [];
  private readonly configPath: string;
  private readonly bgpConfigPath: string;
  private readonly keyPath: string;
  /** BIRD in rtr (with `router: true`, once startRouter ran). */
  router?: BgpRouter;
  /** A bearer token of group system:masters (for load on the API servers). */
  readonly adminToken = crypto.randomUUID();
  /**
   * The `edge-ccm vip` processes' binary and their own variables (e.g. BUN_JSC_useJIT=0), set
   * through env(1) for them alone: the benches' variants (the prober and the bench keep theirs).
   */
  vipProcess: { binary?: string; env?: Record<string, string> } = {};

  private constructor(readonly site: L2Lab, private readonly binaries: ReturnType<typeof controlPlaneBinaries>) {
    this.configPath = join(site.lab.dir, 'vip-config.yaml');
    this.bgpConfigPath = join(site.lab.dir, 'vip-config-bgp.yaml');
    this.keyPath = join(site.lab.dir, 'vip-key');
  }

  static async build(o: { router?: boolean } = {}): Promise<VipLab> {
    const binaries = controlPlaneBinaries(); // fails with the install hint first
    ccmBinaryCommand([]); // and the binary's build hint
    const site = await L2Lab.build(o);
    const lab = new VipLab(site, binaries);
    try {
      await lab.setUp();
    } catch (e) {
      await site.destroy();
      throw e;
    }
    return lab;
  }

  private async setUp(): Promise<void> {
    const { lab } = this.site;
    for (const node of NODES) {
      await lab.ip(node, 'addr', 'add', `${VIP}/32`, 'dev', 'lo');
      await lab.ip(node, 'addr', 'add', `${VIP6}/128`, 'dev', 'lo');
      await lab.ip(node, 'addr', 'add', `${VIP_BGP}/32`, 'dev', 'lo');
    }
    const pki = join(lab.dir, 'pki');
    mkdirSync(pki);
    const [ca, frontProxyCa, serviceAccount] = await Promise.all([
      createCertificateAuthority(pki, 'ca', 'edge-ccm-vip-test-ca'),
      createCertificateAuthority(pki, 'front-proxy-ca', 'edge-ccm-vip-test-front-proxy-ca'),
      createSigningKeyPair(pki, 'service-account'),
    ]);
    const [serving, frontProxyClient] = await Promise.all([
      issueCertificate(ca, pki, 'apiserver', {
        commonName: 'kube-apiserver', usage: 'server', dnsNames: ['localhost', 'kubernetes'],
        ipAddresses: ['127.0.0.1', VIP, VIP_BGP, KUBERNETES_SERVICE_IP, ...NODES.map((n) => this.site.nodes[n].lanIPv4)],
      }),
      issueCertificate(frontProxyCa, pki, 'front-proxy-client', { commonName: 'front-proxy-client', usage: 'client' }),
    ]);
    const tokenAuthFile = join(lab.dir, 'tokens.csv');
    writeFileSync(tokenAuthFile, `${this.adminToken},token-user,token-user-uid,"system:masters"\n`, { mode: 0o600 });
    const auditPolicyFile = join(lab.dir, 'audit-policy.yaml');
    writeFileSync(auditPolicyFile, AUDIT_POLICY);
    this.flags = (node) => apiServerFlags(API_PORT, ETCD, {
      caCert: ca.certPath, servingCert: serving.certPath, servingKey: serving.keyPath,
      frontProxyCaCert: frontProxyCa.certPath, frontProxyClientCert: frontProxyClient.certPath, frontProxyClientKey: frontProxyClient.keyPath,
      serviceAccountPublicKey: serviceAccount.publicKeyPath, serviceAccountPrivateKey: serviceAccount.privateKeyPath,
      tokenAuthFile, auditPolicyFile, auditLogPath: join(lab.dir, `audit-${node}.log`),
    // Later flags win: every address of the node, and its own address advertised.
    }, ['--bind-address=0.0.0.0', `--advertise-address=${this.site.nodes[node].lanIPv4}`]);

    const peer = 'http://198.51.100.99:2380';
    const etcd = lab.spawnLogged('client', 'etcd', [
      this.binaries.etcd, '--name=default', `--data-dir=${join(lab.dir, 'etcd-data')}`,
      `--listen-client-urls=${ETCD}`, `--advertise-client-urls=${ETCD}`, `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`, `--initial-cluster=default=${peer}`, '--unsafe-no-fsync', '--log-level=warn',
    ]);
    await eventually(`etcd (log ${etcd.logPath})`, async () => (await lab.exec('client', ['curl', '-s', `${ETCD}/health`])).stdout.includes('"health":"true"') || (!etcd.running && Promise.reject(new Error(etcd.logTail()))), 60_000);

    writeFileSync(this.keyPath, randomBytes(32).toString('hex'), { mode: 0o600 });
    this.setPreferredHost(undefined);
    writeFileSync(this.bgpConfigPath, [
      'controlPlaneEndpoint:',
      `  addresses: [${VIP_BGP}]`,
      '  announce: bgp',
      '  bgp:',
      `    localASN: ${SPEAKER_ASN}`,
      `    peers: [{address: ${ROUTER4}, asn: ${ROUTER_ASN}, holdTimeSeconds: 9, connectRetry: {minSeconds: 0.2, maxSeconds: 2}}]`,
      `    bfd: {transmitIntervalMilliseconds: ${BFD.intervalMs}, receiveIntervalMilliseconds: ${BFD.intervalMs}, detectMultiplier: ${BFD.multiplier}}`,
      '  hosts:',
      ...NODES.map((n) => `    - {name: ${n}, address: ${this.site.nodes[n].lanIPv4}}`),
      '',
    ].join('\n'));
  }

  /** Writes the L2 config, sticky (undefined) or with controlPlaneEndpoint.preferredHost; read by the vips started from now on. */
  setPreferredHost(host: NodeName | undefined): void {
    writeFileSync(this.configPath, [
      'controlPlaneEndpoint:',
      `  addresses: [${VIP}, "${VIP6}"]`,
      '  announce: l2',
      '  interfaces: [eth0]',
      '  hosts:',
      ...NODES.map((n) => `    - {name: ${n}, address: ${this.site.nodes[n].lanIPv4}}`),
      ...(host ? [`  preferredHost: ${host}`] : []),
      '',
    ].join('\n'));
  }

  /** BIRD in rtr with a BGP and BFD session to each host; rtr forwards to VIP_BGP's next hop, the client reaches VIP_BGP through rtr. */
  async startRouter(): Promise<BgpRouter> {
    const { lab } = this.site;
    await lab.sysctl('rtr', { 'net.ipv4.ip_forward': 1, 'net.ipv4.conf.all.send_redirects': 0, 'net.ipv4.conf.eth0.send_redirects': 0 });
    await lab.sysctl('client', { 'net.ipv4.conf.all.accept_redirects': 0 });
    await lab.ip('client', 'route', 'add', `${VIP_BGP}/32`, 'via', ROUTER4, 'dev', 'eth0');
    this.router = await startRouter(lab, 'bird', {
      speakers: [],
      bfdNodes: { nodes: NODES.map((n) => ({ v4: this.site.nodes[n].lanIPv4, v6: this.site.nodes[n].lanIPv6 })), ...BFD, ipv4Only: true },
    });
    return this.router;
  }

  /** Starts the node's kube-apiserver (unless it runs) and waits until its /readyz answers 200 on 127.0.0.1. */
  async startApiServer(node: NodeName): Promise<void> {
    if (this.apiServers.get(node)?.running) return;
    const proc = this.site.lab.spawnLogged(node, `apiserver-${node}`, [this.binaries['kube-apiserver'], ...this.flags(node)]);
    this.apiServers.set(node, proc);
    await eventually(`kube-apiserver on ${node} (log ${proc.logPath})`, async () => (await this.readyz(node, '127.0.0.1')) || (!proc.running && Promise.reject(new Error(proc.logTail()))), 180_000);
  }

  /** One GET of /readyz on `address` (IPv4 or IPv6) from inside the node's namespace: answered 200. */
  async readyz(node: NodeName | 'client', address: string, timeoutSeconds = 2): Promise<boolean> {
    const host = address.includes(':') ? `[${address}]` : address;
    const r = await this.site.lab.exec(node, ['curl', '-gsk', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', String(timeoutSeconds), `https://${host}:${API_PORT}/readyz`]);
    return r.stdout.trim() === '200';
  }

  /** Starts the node's `edge-ccm vip` with the L2 config, or the BGP one. */
  startVip(node: NodeName, announce: 'l2' | 'bgp' = 'l2'): LoggedProcess {
    const config = announce === 'bgp' ? this.bgpConfigPath : this.configPath;
    const args = ['vip', `--cloud-config=${config}`, `--node-name=${node}`, `--liveness-key-file=${this.keyPath}`, `--metrics-bind-address=127.0.0.1:${VIP_METRICS_PORT}`];
    const proc = this.spawnVip(node, `vip-${announce}-${node}`, args, this.vipProcess.binary, this.vipProcess.env);
    this.vips.set(node, proc);
    return proc;
  }

  /**
   * For benches running several builds or timings side by side: an L2 config of its own (VIP
   * `address`, heartbeats on `heartbeatPort`, `timings` as controlPlaneEndpoint.timings takes
   * them), announced on `iface` (default eth0), written once under `name`, and `binary` started
   * with it on `node`, metrics on `metricsPort`, under `env` alone (and systemd's PATH), as the
   * unit starts it: nothing of the caller's shell reaches one variant and not the figures' other
   * sides. Not in this.vips: the caller ends it (destroy() ends the lab's namespaces).
   */
  startVipVariant(node: NodeName, v: { name: string; binary: string; address: string; heartbeatPort: number; metricsPort: number; timings?: Record<string, number>; env?: Record<string, string>; iface?: string }): LoggedProcess {
    const config = join(this.site.lab.dir, `vip-config-${v.name}.yaml`);
    writeFileSync(config, [
      'controlPlaneEndpoint:',
      `  addresses: [${v.address}]`,
      '  announce: l2',
      `  interfaces: [${v.iface ?? 'eth0'}]`,
      `  heartbeatPort: ${v.heartbeatPort}`,
      ...(v.timings ? ['  timings:', ...Object.entries(v.timings).map(([k, ms]) => `    ${k}: ${ms}`)] : []),
      '  hosts:',
      ...NODES.map((n) => `    - {name: ${n}, address: ${this.site.nodes[n].lanIPv4}}`),
      '',
    ].join('\n'));
    const args = ['vip', `--cloud-config=${config}`, `--node-name=${node}`, `--liveness-key-file=${this.keyPath}`, `--metrics-bind-address=127.0.0.1:${v.metricsPort}`];
    return this.spawnVip(node, `vip-${v.name}-${node}`, args, v.binary, { PATH: SYSTEMD_DEFAULT_PATH, ...v.env }, true);
  }

  /** With `onlyEnv`, `env` is the whole environment (env -i); otherwise it is added to this process's. */
  private spawnVip(node: NodeName, logName: string, args: string[], binary?: string, env: Record<string, string> = {}, onlyEnv = false): LoggedProcess {
    const cmd = ccmBinaryCommand(args, binary);
    const vars = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    // env(1) execs: the pid stays the vip's own.
    return this.site.lab.spawnLogged(node, logName, vars.length || onlyEnv ? ['/usr/bin/env', ...(onlyEnv ? ['-i'] : []), ...vars, ...cmd] : cmd);
  }

  /**
   * Starts kube-vip's control-plane ARP mode on the node (the anchor of issue 38): `--controlplane
   * --arp --leaderElection` for `address` on eth0, through the node's own API server (a kubeconfig
   * of the lab's system:masters token) with its Lease in kube-system. `lease` overrides kube-vip's
   * lease duration, renew deadline and retry period (seconds; its defaults are 15, 10, 2).
   */
  /**
   * kube-vip in edge-ccm's place on `node`. `group` lets several kube-vip groups run at once (the
   * footprint bench's lease timers side by side): its own Lease name, metrics port and log name.
   */
  startKubeVip(node: NodeName, o: { binary: string; address: string; lease?: [number, number, number]; group?: { name: string; metricsPort: number } }): LoggedProcess {
    const kubeconfig = join(this.site.lab.dir, 'kube-vip.kubeconfig');
    // Written once: a kube-vip starting on another host may be reading it.
    if (!existsSync(kubeconfig)) writeFileSync(kubeconfig, [
      'apiVersion: v1', 'kind: Config', 'current-context: c',
      `clusters: [{name: c, cluster: {server: "https://127.0.0.1:${API_PORT}", insecure-skip-tls-verify: true}}]`,
      `users: [{name: u, user: {token: "${this.adminToken}"}}]`,
      'contexts: [{name: c, context: {cluster: c, user: u}}]', '',
    ].join('\n'), { mode: 0o600 });
    const lease = o.lease ? [`--leaseDuration=${o.lease[0]}`, `--leaseRenewDuration=${o.lease[1]}`, `--leaseRetry=${o.lease[2]}`] : [];
    const group = o.group ? [`--leaseName=plndr-cp-lock-${o.group.name}`] : [];
    return this.site.lab.spawnLogged(node, o.group ? `kube-vip-${o.group.name}-${node}` : `kube-vip-${node}`, kubeVipCommand(o.binary, kubeconfig, ['--controlplane', '--arp', '--leaderElection', '--interface=eth0',
      `--address=${o.address}`, `--port=${API_PORT}`, `--nodeName=${node}`, `--prometheusHTTPServer=127.0.0.1:${o.group?.metricsPort ?? 2112}`, ...lease, ...group]));
  }

  /** GET `path` of the node's `edge-ccm vip` metrics server: the body, or undefined when it did not answer 200. */
  async vipEndpoint(node: NodeName, path: '/metrics' | '/readyz'): Promise<string | undefined> {
    const r = await this.site.lab.exec(node, ['curl', '-sf', '--max-time', '2', `http://127.0.0.1:${VIP_METRICS_PORT}${path}`]);
    return r.code === 0 ? r.stdout : undefined;
  }

  /** The node whose lan MAC is `mac`. */
  nodeOfMac(mac: string): NodeName | undefined {
    return NODES.find((n) => this.site.nodes[n].lanMac === mac);
  }

  async destroy(): Promise<void> {
    await Promise.all([...this.vips.values(), ...this.apiServers.values()].map((p) => p.kill()));
    await this.router?.stop();
    await this.site.destroy();
  }
}
