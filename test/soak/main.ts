import { writeFileSync } from 'node:fs';
import { parseSoakArgs } from './options.ts';
import { formatMarkdown, formatReport } from './report.ts';
import { runSoak } from './soak.ts';

/**
 * scripts/soak: the fault soak (docs/reliability.md). Prints the seed first, so any run can be
 * replayed with --seed; exits 0 when no invariant was violated, 1 when one was, 2 on bad usage.
 */
let opts;
try {
  opts = parseSoakArgs(process.argv.slice(2));
} catch (e) {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(2);
}
const replay = `scripts/soak --seed ${opts.seed} --minutes ${opts.minutes} --profile ${opts.profile.name}`;
console.log(`soak seed ${opts.seed} (replay: ${replay})`);
const report = await runSoak(opts, (line) => console.log(`[${new Date().toISOString()}] ${line}`));
console.log(formatReport(report));
if (opts.reportPath) {
  writeFileSync(opts.reportPath, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(opts.reportPath.replace(/(\.json)?$/, '.md'), `${formatMarkdown(report)}\n`);
}
console.log(`replay: ${replay}`);
process.exit(report.violations.length ? 1 : 0);
