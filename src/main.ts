import { versionLine } from './version.ts';
import { runSelfTest } from './selftest.ts';

// Parse flags -> build the app -> run; nothing else lives here.
const argv = process.argv.slice(2);
if (argv.includes('--version')) {
  console.log(versionLine());
  process.exit(0);
}
if (argv[0] === 'selftest') {
  const i = argv.indexOf('--kubeconfig');
  const path = i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith('--kubeconfig='))?.slice(13);
  if (!path) {
    console.error('selftest: --kubeconfig is required');
    process.exit(2);
  }
  process.exit(await runSelfTest(path));
}
console.log('edge-ccm: the controller manager is not wired yet; see --version and selftest');
