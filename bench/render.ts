/** Renders the tables of a results file again: bun bench/render.ts RESULTS.json [--steady-seconds=N] */
import { renderMarkdown, type RunResult } from './report.ts';

const [path] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
if (!path) throw new Error('usage: bun bench/render.ts RESULTS.json [--steady-seconds=N]');
const steadySeconds = Number(process.argv.find((a) => a.startsWith('--steady-seconds='))?.split('=')[1] ?? 300);
const { results } = (await Bun.file(path).json()) as { results: RunResult[] };
console.log(renderMarkdown(results, { steadySeconds }));
