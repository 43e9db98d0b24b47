import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProviderRegistry } from '../cloud/registry.ts';
import { ConfigurationError, resolveSettings } from './settings.ts';
import { runControllerManager } from './app.ts';
import { parseArgs } from '../options/index.ts';
import { delegatedAuthClients } from './delegated-auth-clients.ts';
import { writeKubeconfig } from '../../test/harness/kubeconfig.ts';

/** Flags become settings once, and every problem with them is reported in the same run. */

const options = (...argv: string[]) => parseArgs(argv).options;

describe('settings from flags', () => {
  test('every problem at once: an unknown provider and two kubeconfigs that are not there', async () => {
    const flags = options('--cloud-provider', 'nope', '--kubeconfig', '/nonexistent/edge-ccm/kc', '--authentication-kubeconfig', '/nonexistent/edge-ccm/authn');
    const failure = await runControllerManager(flags, new ProviderRegistry(), new AbortController().signal).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ConfigurationError);
    const message = (failure as Error).message;
    expect(message).toContain('--cloud-provider: unknown cloud provider "nope"');
    expect(message).toContain('--kubeconfig');
    expect(message).toContain('/nonexistent/edge-ccm/kc');
    expect(message).toContain('--authentication-kubeconfig');
  });

  test('typed values, no empty-string sentinels: unset files are undefined, the lifecycle defaults apply', () => {
    const settings = resolveSettings(options('--cloud-provider', 'static', '--master', 'https://127.0.0.1:6443'));
    expect(settings.server.tlsCertFile).toBeUndefined();
    expect(settings.server.tlsKeyFile).toBeUndefined();
    expect(settings.controllers.lifecycle.deletionPolicy).toBe('delete');
    expect(settings.controllers.lifecycle.breaker.maxCount).toBeUndefined();
    expect(settings.controllers.clusterCIDRs).toEqual([]);
  });

  test('the delegated-auth kubeconfigs are read once, with the flags: the clients use what was read then', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-settings-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const authn = await writeKubeconfig(join(dir, 'authn.yaml'), 'https://127.0.0.1:7443', 'ca', 'reviewer', { token: 't' });
    const authz = await writeKubeconfig(join(dir, 'authz.yaml'), 'https://127.0.0.1:8443', 'ca', 'reviewer', { token: 't' });
    const settings = resolveSettings(options('--cloud-provider', 'static', '--master', 'https://127.0.0.1:6443', '--authentication-kubeconfig', authn, '--authorization-kubeconfig', authz));
    rmSync(authn);
    rmSync(authz);
    const clients = delegatedAuthClients(settings.delegatedAuth, settings.kubeConfig, { userAgent: 'edge-ccm/test' });
    expect(clients.tokenReviews.server).toBe('https://127.0.0.1:7443');
    expect(clients.accessReviews.server).toBe('https://127.0.0.1:8443');
  });

  test('node IPAM: its flags are checked only when it runs (named in --controllers and --allocate-node-cidrs), in --cluster-cidr order', () => {
    const base = ['--cloud-provider', 'static', '--master', 'https://127.0.0.1:6443'];
    // A manifest that passed --allocate-node-cidrs while edge-ccm ignored it still starts.
    expect(resolveSettings(options(...base, '--allocate-node-cidrs')).controllers.nodeIPAM).toBeUndefined();
    expect(() => resolveSettings(options(...base, '--allocate-node-cidrs', '--controllers=*,nodeipam'))).toThrow('--cluster-cidr: required by --allocate-node-cidrs');
    expect(() => resolveSettings(options(...base, '--allocate-node-cidrs', '--controllers=*,nodeipam', '--cluster-cidr=10.244.0.0/16,2001:db8::/48', '--node-cidr-mask-size=24')))
      .toThrow('--node-cidr-mask-size: not allowed with dual-stack clusters');
    const ipam = resolveSettings(options(...base, '--allocate-node-cidrs', '--controllers=*,nodeipam', '--cluster-cidr=2001:db8::/48,10.244.0.0/16', '--service-cluster-ip-range=10.96.0.0/12')).controllers.nodeIPAM!;
    expect(ipam.maskSizes).toEqual([64, 24]);
    expect(ipam.clusterCIDRs.map((c) => c.family)).toEqual([6, 4]);
    expect(ipam.serviceCIDRs).toHaveLength(1);
    expect(ipam.recordName).toBe('cloud-controller-manager-node-ipam');
  });
});
