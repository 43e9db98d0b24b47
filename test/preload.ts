/**
 * Runs before every `bun test`: cheap, starts nothing. Integration tests need kube-apiserver and
 * etcd built beforehand, so a run without them stops here with the one-line fix instead of
 * failing test by test. EDGE_CCM_SKIP_CONTROL_PLANE_CHECK=1 skips the check (unit tests only).
 */
import { missingBinaryMessage } from './harness/binaries.ts';

if (!process.env.EDGE_CCM_SKIP_CONTROL_PLANE_CHECK) {
  const missing = missingBinaryMessage();
  if (missing) {
    console.error(missing);
    process.exit(1);
  }
}
