import type { V1Node } from '@kubernetes/client-node';
import { loadProxmoxConfig } from '../../providers/proxmox/config-load.ts';
import type { ProxmoxConfig } from '../../providers/proxmox/config-model.ts';
import { ProxmoxProvider } from '../../providers/proxmox/provider.ts';
import type { SecretSource } from '../../src/config-file/secrets.ts';
import { formatConfigErrors } from '../../src/config-file/yaml-load.ts';
import { createLogger, type Logger } from '../../src/log.ts';
import { afterEach } from 'bun:test';
import { ProxmoxResponder, type FakeVm, type ProxmoxResponderOptions } from './proxmox-responder.ts';

/** Shared by the proxmox unit tests: secrets, configs, nodes, a clock the tests move. */

export const TOKEN_ID = 'ccm@pve!edge-ccm';
export const TOKEN_SECRET = '6f0c1d9e-2b4a-4c7e-9f1a-0123456789ab';
export const USER = 'ccm@pve';
export const PASSWORD = 'correct horse';

export const SECRETS: SecretSource = {
  readFile: (path) => {
    if (path === '/secrets/token') return `${TOKEN_SECRET}\n`;
    if (path === '/secrets/password') return `${PASSWORD}\n`;
    throw new Error(`ENOENT: no such file or directory, open '${path}'`);
  },
  env: (name) => (name === 'PVE_PASSWORD' ? PASSWORD : name === 'PVE_TOKEN' ? TOKEN_SECRET : undefined),
};

/** A manual clock: the provider's caches, back-off, token bucket and tickets all read it. */
export class Clock {
  t = 1_000_000;
  readonly now = () => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
}

export function loadOrThrow(yaml: string, secrets: SecretSource = SECRETS): ProxmoxConfig {
  const r = loadProxmoxConfig(yaml, secrets);
  if (!r.ok) throw new Error(formatConfigErrors('test.yaml', r.errors));
  return r.config;
}

/** One cluster with token auth; `cluster` and `top` add YAML lines (indented by the caller's dedent). */
export function tokenConfig(url: string, opts: { region?: string; cluster?: string[]; top?: string[] } = {}): string {
  return [
    'clusters:',
    `  - region: ${opts.region ?? 'fra1'}`,
    `    url: ${url}`,
    // The responder serves plain HTTP on loopback unless a test gives it a certificate.
    ...(url.startsWith('http:') ? ['    allowInsecureHTTP: true'] : []),
    `    tokenId: ${TOKEN_ID}`,
    '    tokenSecretFile: /secrets/token',
    // Generous: the tests count requests, not tokens.
    '    qps: 1000',
    '    burst: 1000',
    ...(opts.cluster ?? []).map((l) => `    ${l}`),
    ...(opts.top ?? []),
  ].join('\n') + '\n';
}

export const quietLogger: Logger = createLogger({ write: () => {} });

/** A logger that keeps its lines, for tests that look at what was logged. */
export function recordingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: createLogger({ write: (l) => lines.push(l), verbosity: 2 }), lines };
}

export function providerFor(yaml: string, clock: Clock, logger: Logger = quietLogger, backoff = { initialMs: 1_000, maxMs: 8_000 }): ProxmoxProvider {
  return new ProxmoxProvider(loadOrThrow(yaml), { logger, now: clock.now, backoff });
}

export function node(name: string, opts: { providerID?: string; systemUUID?: string } = {}): V1Node {
  return {
    metadata: { name, uid: `uid-${name}` },
    spec: opts.providerID ? { providerID: opts.providerID } : {},
    status: opts.systemUUID ? { nodeInfo: { systemUUID: opts.systemUUID } as NonNullable<V1Node['status']>['nodeInfo'] } : {},
  };
}

/** A few VMs on two hosts: static addresses, a guest agent, a stopped one, a tagged one. */
export function sampleVms(): FakeVm[] {
  return [
    { vmid: 101, name: 'k8s-worker-1', node: 'pve1', cores: 4, memoryMiB: 8192, uuid: '3F2504E0-4F89-11D3-9A0C-0305E82C3301', ipconfig: ['ip=10.0.1.11/24,gw=10.0.1.1,ip6=fd00:1::11/64'] },
    { vmid: 102, name: 'k8s-worker-2', node: 'pve2', pool: 'storage', tags: ['ceph'], cores: 2, memoryMiB: 1536, agent: true, agentRunning: true, interfaces: { eth0: ['10.0.1.12', 'fe80::be24:11ff:fe00:1'], cni0: ['10.244.1.1'] } },
    { vmid: 103, name: 'k8s-worker-3', node: 'pve1', status: 'stopped', ipconfig: ['ip=10.0.1.13/24'] },
    { vmid: 104, name: 'k8s-gpu-1', node: 'pve2', cores: 16, memoryMiB: 65536, tags: ['k8s', 'instance-type.gpu-large'], ipconfig: ['ip=dhcp'], agent: true, agentRunning: false },
    { vmid: 900, name: 'ubuntu-template', node: 'pve1', template: true },
  ];
}

/** A Proxmox VE API that knows the token and the sample VMs (`opts` may replace either, or add more). */
export function sampleResponder(opts: ProxmoxResponderOptions = {}): ProxmoxResponder {
  return ProxmoxResponder.start({ tokens: { [TOKEN_ID]: TOKEN_SECRET }, vms: sampleVms(), ...opts });
}

/**
 * The responder and provider a test starts, closed after each test of the file or describe
 * block that calls this (it registers the afterEach).
 */
export function closedAfterEach(): { responder?: ProxmoxResponder; provider?: ProxmoxProvider } {
  const t: { responder?: ProxmoxResponder; provider?: ProxmoxProvider } = {};
  afterEach(async () => {
    await t.provider?.close();
    t.responder?.stop();
    t.responder = t.provider = undefined;
  });
  return t;
}
