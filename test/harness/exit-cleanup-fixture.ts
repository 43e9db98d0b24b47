/**
 * Run as a child process by test/integration/harness.test.ts to prove the exit-time cleanup:
 * starts the shared control plane, prints where it lives, then either just ends ("end") or
 * idles until a signal ends it ("wait").
 */
import { sharedControlPlane } from './control-plane.ts';

const cp = await sharedControlPlane();
console.log(JSON.stringify({ dir: cp.dir, server: cp.server }));
if (process.argv[2] === 'wait') setInterval(() => undefined, 60_000);
