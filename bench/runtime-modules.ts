/**
 * What loading one of the runtime's modules costs a compiled Bun program (issue 38): each program
 * is the same small base (an HTTP server asked every 100 ms, a UDP socket sending to itself,
 * bun:ffi called once, a SIGTERM handler, os.networkInterfaces(), an HMAC by Bun.CryptoHasher, a
 * console.error line: what a vip needs of the runtime without node's JavaScript modules) plus one
 * thing: a node module loaded and used, or the runtime's own way to do the same (and ICU's
 * collation, which localeCompare brings, against a plain comparison). Compiled as
 * scripts/build.ts compiles (`--minify --bytecode`), every binary dropped from the page cache
 * before it starts (bench/page-cache.ts), run with the unit's BUN_JSC_useDFGJIT=0; RSS read after
 * --seconds, anonymous and file-backed apart.
 *
 *   bun bench/runtime-modules.ts [--seconds=4] [--repeat=2]
 *
 * Prints a Markdown table; the last rows load several together (what the speaker and the vip
 * loaded before session 15, and after).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evictFromPageCache } from './page-cache.ts';
import { residentMiB } from './proc-sampler.ts';
import { compileProgram } from './compile-program.ts';
import { stringOption as opt } from './args.ts';

const SECONDS = Number(opt('seconds', '4'));
const REPEAT = Number(opt('repeat', '2'));
if (!(SECONDS > 0) || !(Number.isInteger(REPEAT) && REPEAT > 0)) throw new Error('--seconds: a positive number; --repeat: a positive integer');

const BASE = `
const { dlopen, FFIType } = require('bun:ffi');
dlopen('libc.so.6', { getpid: { args: [], returns: FFIType.i32 } }).symbols.getpid();
const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('ok') });
setInterval(() => fetch('http://127.0.0.1:' + server.port + '/').then((r) => r.text()), 100);
(async () => {
  const s = await Bun.udpSocket({ socket: { data() {} } });
  setInterval(() => s.send(new Uint8Array(8), s.port, '127.0.0.1'), 100);
})();
process.on('SIGTERM', () => process.exit(0));
require('node:os').networkInterfaces();
setInterval(() => new Bun.CryptoHasher('sha256', 'k').update('x').digest(), 100);
console.error('');
`;

const FS_SYNC = `{ const f = require('node:fs'); const fd = f.openSync('/etc/hostname', 'r'); f.fstatSync(fd); f.readSync(fd, Buffer.alloc(100), 0, 100, null); f.closeSync(fd); }`;
const FS_PROMISES = `require('node:fs/promises').open('/etc/hostname').then((h) => h.close());`;
const NODE_CRYPTO = `globalThis.keep = [require('node:crypto').createPrivateKey, require('node:crypto').createHash('sha256').update('x').digest('hex')];`;
const DGRAM = `{ const d = require('node:dgram').createSocket('udp4'); d.bind(0); }`;
const UTIL = `globalThis.keep = require('node:util').format('%s', 'x');`;
const STDERR_STREAM = `setInterval(() => process.stderr.write(''), 100);`;
const V8 = `globalThis.keep = require('node:v8').getHeapSpaceStatistics();`;
const PERF_HOOKS = `globalThis.keep = require('node:perf_hooks').constants;`;
const PATH = `globalThis.keep = require('node:path').join('a', 'b');`;
// 200 addresses sorted every 100 ms, as the speaker sorts its announced addresses: ICU's collation against code units.
const ADDRESSES = `const xs = Array.from({ length: 200 }, (_, i) => '198.51.100.' + ((i * 37) % 250));`;
const SORT_LOCALE = `${ADDRESSES} setInterval(() => { globalThis.keep = [...xs].sort((a, b) => a.localeCompare(b)); }, 100);`;
const SORT_CODE_UNITS = `${ADDRESSES} setInterval(() => { globalThis.keep = [...xs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)); }, 100);`;

const PROGRAMS: [name: string, body: string][] = [
  ['the base alone', ''],
  ['+ node:fs (open, fstat, read, close: sync)', FS_SYNC],
  ['+ node:fs/promises', FS_PROMISES],
  ['+ node:crypto (createPrivateKey, createHash)', NODE_CRYPTO],
  ['+ node:dgram (a socket bound)', DGRAM],
  ['+ node:util (format)', UTIL],
  ["+ process.stderr.write (node's stream)", STDERR_STREAM],
  ['+ node:v8 (getHeapSpaceStatistics)', V8],
  ['+ node:perf_hooks', PERF_HOOKS],
  ['+ node:path', PATH],
  ['+ Bun.file().text() (the runtime\'s file read)', `setInterval(() => Bun.file('/etc/hostname').text(), 100);`],
  ['+ sorting 200 addresses by localeCompare (ICU collation)', SORT_LOCALE],
  ['+ sorting 200 addresses by code units (src/util/compare.ts)', SORT_CODE_UNITS],
  ['the vip before session 15: + fs, fs/promises, crypto, dgram, util, stderr stream, v8, perf_hooks', [FS_SYNC, FS_PROMISES, NODE_CRYPTO, DGRAM, UTIL, STDERR_STREAM, V8, PERF_HOOKS].join('\n')],
  ['the vip now: + fs, v8', [FS_SYNC, V8].join('\n')],
];

const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-runtime-modules-'));
try {
  const binaries = PROGRAMS.map(([, body], i) => {
    const src = join(dir, `p${i}.ts`);
    writeFileSync(src, `${BASE}\n${body}\n`);
    const out = join(dir, `p${i}`);
    compileProgram(src, out);
    return out;
  });
  const results = PROGRAMS.map(() => [] as { anon: number; file: number }[]);
  for (let r = 0; r < REPEAT; r++) {
    for (const [i, binary] of binaries.entries()) {
      evictFromPageCache([binary]);
      const proc = Bun.spawn([binary], { env: { ...process.env, BUN_JSC_useDFGJIT: '0' }, stdout: 'ignore', stderr: 'ignore' });
      try {
        await Bun.sleep(SECONDS * 1000);
        if (proc.exitCode !== null) throw new Error(`${PROGRAMS[i]![0]} exited (${proc.exitCode}) before it was measured`);
        const { anon, file } = residentMiB(proc.pid);
        results[i]!.push({ anon, file });
      } finally {
        proc.kill('SIGKILL');
        await proc.exited;
      }
    }
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const base = { anon: mean(results[0]!.map((x) => x.anon)), file: mean(results[0]!.map((x) => x.file)) };
  console.log(`| program | anonymous MiB (each run) | file-backed MiB (each run) | above the base: anonymous + file-backed |`);
  console.log('|---|---|---|---|');
  for (const [i, [name]] of PROGRAMS.entries()) {
    const rs = results[i]!;
    const anon = mean(rs.map((x) => x.anon));
    const file = mean(rs.map((x) => x.file));
    console.log(`| ${name} | ${rs.map((x) => x.anon.toFixed(1)).join(', ')} | ${rs.map((x) => x.file.toFixed(1)).join(', ')} | ${i === 0 ? '-' : `${(anon - base.anon).toFixed(1)} + ${(file - base.file).toFixed(1)}`} |`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
