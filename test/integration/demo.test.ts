import { expect, test } from 'bun:test';
import { join } from 'node:path';

/**
 * The README's main job (scripts/demo.sh runs install, build, then this script): it must reach
 * initialised nodes and an external IP on a machine like this one. --once stops it after showing.
 */
test('the demo initialises the nodes from the example inventory and gives the service an external IP', async () => {
  const root = join(import.meta.dir, '../..');
  const proc = Bun.spawn([process.execPath, join(root, 'scripts/demo.ts'), '--once'], { cwd: root, stdout: 'pipe', stderr: 'pipe' });
  const timer = setTimeout(() => proc.kill('SIGKILL'), 150_000);
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  const output = out + err;
  expect(code, output).toBe(0);
  for (const node of ['node-a', 'node-b', 'node-c']) expect(output).toMatch(new RegExp(`${node}\\s+static://${node}\\s+type=\\S+\\s+zone=lab-1\\s+region=demo`));
  expect(output).toMatch(/default\/demo-web\s+type=LoadBalancer\s+external IP=192\.0\.2\.\d+/);
  expect(output).toContain('/metrics');
}, 180_000);
