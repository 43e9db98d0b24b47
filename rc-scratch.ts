import { RealCluster } from './test/harness/real-cluster.ts';
import { createLoadBalancer, createNamespace, deployEcho, loadBalancerAddress, podsReady } from './test/harness/echo-workload.ts';
import { readFileSync } from 'node:fs';
const c = await RealCluster.start({ nodes: 3 });
try {
  await c.routePodCidrs();
  await createNamespace(c.admin, 'web');
  await deployEcho(c.admin, 'web', 'echo', 3);
  await createLoadBalancer(c.admin, 'web', 'echo', { local: true });
  const a = await loadBalancerAddress(c.admin, 'web', 'echo', () => '');
  await podsReady(c.admin, 'web', 'echo', 3, () => c.logs());
  for (let i = 0; i < 5; i++) console.log('answer', await c.fetchFromClient(a, 80));
  await Bun.sleep(90_000);
  console.log('=== edge-ccm\n' + c.ccm!.logs().split('\n').filter((l) => /warn|error|fail|W1|E1/i.test(l)).slice(-40).join('\n'));
  for (const [n, s] of c.speakers) console.log(`=== speaker ${n}\n` + readFileSync(s.logPath, 'utf8').split('\n').filter((l) => /warn|error|fail/i.test(l)).slice(-15).join('\n'));
  console.log(await c.kubectl(['get', 'nodes', '-o', 'wide']));
  console.log(await c.kubectl(['get', 'events', '-A', '--field-selector', 'type=Warning']));
  // Audit: who wrote node status, how often.
  const audit = readFileSync(c.cp.auditLogPath, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const writes = audit.filter((e: any) => e.objectRef?.resource === 'nodes' && ['update', 'patch'].includes(e.verb) && e.stage === 'ResponseComplete');
  const by: Record<string, number> = {};
  for (const w of writes) by[`${w.user.username} ${w.verb} ${w.objectRef.subresource ?? ''}`] = (by[`${w.user.username} ${w.verb} ${w.objectRef.subresource ?? ''}`] ?? 0) + 1;
  console.log(by);
} finally {
  await c.stop();
}
