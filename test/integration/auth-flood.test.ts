import { afterAll, beforeAll, expect, test } from 'bun:test';
import { Flood, requestFrom } from '../harness/auth-flood.ts';
import { CcmProcess, fakeProviderConfig } from '../harness/ccm-process.ts';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';
import { kubeconfigToken } from '../harness/kubeconfig.ts';

/**
 * The serving port under a flood of random bearer tokens (issue: 2000 such requests made a valid
 * token fail for about 100 s). edge-ccm runs as users run it (delegated auth wired by the app,
 * default --kube-api-qps/--kube-api-burst) against the real kube-apiserver. How long the good
 * request took is a benchmark figure (scripts/bench-auth-flood), not asserted here.
 */

let cp: ControlPlane;
let ccm: CcmProcess;
let base: string;
let adminToken: string;

beforeAll(async () => {
  cp = await sharedControlPlane();
  const fakeConfig = fakeProviderConfig('edge-ccm-auth-flood-');
  const [port] = await freeLoopbackPorts(1);
  base = `https://127.0.0.1:${port}`;
  adminToken = kubeconfigToken(cp.tokenKubeconfig('admin'));
  ccm = CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${fakeConfig}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--bind-address=127.0.0.1', `--secure-port=${port}`, '--configure-cloud-routes=false',
    `--leader-elect-resource-name=auth-flood-${process.pid}`,
  ]);
  await ccm.waitForLog('serving securely');
}, 240_000);

afterAll(async () => {
  await ccm?.stop();
});

test('a valid token is let in while 2000 requests with random tokens flood the port', async () => {
  const flood = new Flood({ url: `${base}/metrics`, total: 2000, concurrency: 256 });
  // The flood is at the server (its first answers are back) before the good request goes out.
  await eventually('the flood to be under way', () => flood.answered >= 50, 60_000);
  // A token this process has never seen: no cached answer, it needs a TokenReview of its own.
  const good = requestFrom('127.0.0.2', `${base}/metrics`, adminToken);
  flood.extendUntil(good);
  const answer = await good;
  const stillFlooding = flood.inFlight;
  await flood.finished();

  expect(answer.status).toBe(200);
  // It was answered during the flood, not after it.
  expect(stillFlooding).toBeGreaterThan(0);
  expect(flood.sent).toBeGreaterThanOrEqual(2000);
  // Every random token is refused: 401 once reviewed, 429 when its client already has its share
  // of reviews in flight.
  const outcomes = Object.keys(flood.statuses).map(Number).sort();
  expect(outcomes.every((s) => s === 401 || s === 429)).toBe(true);
  expect(flood.statuses[401]).toBeGreaterThan(0);
}, 180_000);
