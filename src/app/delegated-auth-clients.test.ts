import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { delegatedAuthClients } from './delegated-auth-clients.ts';
import { loadKubeConfig } from './kubeconfig.ts';
import { writeKubeconfig } from '../../test/harness/kubeconfig.ts';

/**
 * Which clients the serving side's TokenReviews and SubjectAccessReviews go through: each its
 * own, with upstream's QPS 200 / burst 400 whatever --kube-api-qps says and wherever it points.
 */

const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-auth-clients-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ours = new KubeConfig();
ours.loadFromClusterAndUser({ name: 'ours', server: 'https://127.0.0.1:6443', skipTLSVerify: false }, { name: 'ccm', token: 'x' });
const controllerBudget = { qps: 20, burst: 30, userAgent: 'edge-ccm/test' };
const noFlags = {};
const UPSTREAM = { qps: 200, burst: 400 };

describe('delegatedAuthClients', () => {
  test('through --kubeconfig: a budget of their own, not the controllers\' --kube-api-qps', () => {
    const clients = delegatedAuthClients(noFlags, ours, controllerBudget);
    expect(clients.tokenReviews.rateLimit).toEqual(UPSTREAM);
    expect(clients.accessReviews.rateLimit).toEqual(UPSTREAM);
    expect(clients.tokenReviews.server).toBe('https://127.0.0.1:6443');
  });

  test('TokenReviews and SubjectAccessReviews do not share one budget, as upstream', () => {
    const clients = delegatedAuthClients(noFlags, ours, controllerBudget);
    expect(clients.tokenReviews).not.toBe(clients.accessReviews);
  });

  test('through --authentication-kubeconfig: limited all the same (it was unlimited)', async () => {
    const path = await writeKubeconfig(join(dir, 'auth.yaml'), 'https://127.0.0.1:7443', 'ca', 'reviewer', { token: 't' });
    const clients = delegatedAuthClients({ authentication: loadKubeConfig({ kubeconfig: path, flag: '--authentication-kubeconfig' }) }, ours, controllerBudget);
    expect(clients.tokenReviews.server).toBe('https://127.0.0.1:7443');
    expect(clients.tokenReviews.rateLimit).toEqual(UPSTREAM);
    expect(clients.accessReviews.rateLimit).toEqual(UPSTREAM);
  });
});
