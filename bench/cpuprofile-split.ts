/**
 * Where the JS thread's samples of a Bun `.cpuprofile` went within a time window: by part
 * (metrics, logging, JSON, the HTTP client's JS side, collections, ...) and by the nearest
 * edge-ccm frame. For the burst: `cd DIR && bun bench/burst-memory.ts
 * --variant=prof:bench/edge-fake-main.ts::BUN_OPTIONS=--cpu-prof` writes the profile into DIR
 * (the burst starts 3 s after the process); then
 *
 *   bun bench/cpuprofile-split.ts DIR/CPU....cpuprofile [--from-s=3] [--to-s=27]
 *
 * Only the JS thread is sampled: Bun's HTTP client thread (TLS, sockets) and the collector's
 * helper threads are not in it. Not part of scripts/bench's figures.
 */
import { readFileSync } from 'node:fs';
import { numberOption as opt } from './args.ts';

interface ProfileNode { id: number; callFrame: { functionName: string; url: string }; children?: number[] }
interface Profile { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number }

const argv = process.argv.slice(2);
const file = argv.find((a) => !a.startsWith('--'));
if (!file) throw new Error('usage: bun bench/cpuprofile-split.ts FILE.cpuprofile [--from-s=N] [--to-s=N]');
const fromUs = opt('from-s', 0) * 1e6;
const toUs = opt('to-s', Infinity) * 1e6;

const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parentOf = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);

type Frame = { fn: string; url: string };
function stackOf(id: number): Frame[] {
  const frames: Frame[] = [];
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
    const n = byId.get(at);
    if (!n) break;
    frames.push({ fn: n.callFrame.functionName, url: n.callFrame.url });
  }
  return frames;
}

const own = (url: string) => /\/(src|bench)\//.test(url) && !url.includes('node_modules');
const ownPath = (url: string) => /\/((src|bench)\/.*)$/.exec(url)?.[1] ?? url;

/** The part a sample belongs to: what the leaf does, else the nearest edge-ccm frame's module. */
function partOf(stack: Frame[]): string {
  const leaf = stack[0]!;
  if (leaf.fn === 'gc' || leaf.fn === '(garbage collector)') return 'garbage collection';
  if (stack.some((f) => f.url.includes('prom-client')) || leaf.url.includes('/metrics')) return 'metrics (prom-client)';
  if (stack.some((f) => f.url.endsWith('src/log.ts'))) return 'logging';
  const nearest = stack.find((f) => own(f.url));
  const where = nearest ? ownPath(nearest.url) : 'outside edge-ccm';
  if (leaf.fn === 'parse') return `JSON.parse, from ${where}`;
  if (leaf.fn === 'stringify') return `JSON.stringify, from ${where}`;
  if (where === 'src/kube/transport.ts' && !own(leaf.url)) return `native ${leaf.fn}, from src/kube/transport.ts`;
  return where;
}

const counts = new Map<string, number>();
let total = 0;
let t = profile.startTime;
for (let i = 0; i < profile.samples.length; i++) {
  t += profile.timeDeltas[i] ?? 0;
  const at = t - profile.startTime;
  if (at < fromUs || at >= toUs) continue;
  const part = partOf(stackOf(profile.samples[i]!));
  counts.set(part, (counts.get(part) ?? 0) + 1);
  total++;
}

console.log(`${total} samples in the window\n\n| part | samples | share |\n|---|---|---|`);
for (const [part, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
  console.log(`| ${part} | ${n} | ${((100 * n) / total).toFixed(1)} % |`);
}
