import type { L2Lab, NodeName } from './l2-lab.ts';
import type { LoggedProcess } from './processes.ts';

/**
 * The failures of issue 29 an L2 speaker's node goes through, in one place for every side that
 * is judged under them (edge-ccm's speakers in test/integration/l2-failover.test.ts, MetalLB's in
 * bench/l2-failover-metallb.ts): the speaker SIGKILLed (node, link and kernel up), SIGTERMed (a
 * rolling update), or the node's link down (the node dies).
 */
export type L2Fault = 'SIGKILL' | 'SIGTERM' | 'link down';
export const L2_FAULTS: readonly L2Fault[] = ['SIGKILL', 'SIGTERM', 'link down'];

/** Applies the fault to `node` and its running speaker; for SIGTERM, the speaker's exit code. */
export async function applyL2Fault(site: L2Lab, node: NodeName, speaker: LoggedProcess, kind: L2Fault): Promise<number | undefined> {
  if (kind === 'SIGKILL') await speaker.kill();
  else if (kind === 'SIGTERM') return speaker.terminate();
  else await site.lab.ip(node, 'link', 'set', 'eth0', 'down');
  return undefined;
}

/**
 * The node back from the fault as a restarted node: after a link failure its speaker is killed
 * and the link set up. The caller then starts a new speaker there, in every case.
 */
export async function restoreL2Node(site: L2Lab, node: NodeName, speaker: LoggedProcess, kind: L2Fault): Promise<void> {
  if (kind !== 'link down') return;
  await speaker.kill();
  await site.lab.ip(node, 'link', 'set', 'eth0', 'up');
}
