/**
 * What an idle Bun process pays for being woken, with no edge-ccm code: small programs side by
 * side, each its main thread's CPU (schedstat, ns) and voluntary context switches over a window.
 * The question of issue 38 (session 20): is the VIP's idle CPU its callbacks' work or its wake-ups?
 *
 *   two jobs, one timer    two callbacks every --interval-ms on one setInterval (util/metronome.ts)
 *   two jobs, two timers   the same callbacks on two setIntervals at different phases
 *   idle TCP client        a connected Bun.connect socket, nothing sent after the connection
 *   idle TLS client        the same over TLS, after one request (the VIP's kept-alive health check)
 *   idle UDP socket        a bound Bun.udpSocket, nothing sent
 *   nothing                one timer that never fires in the window
 *
 * Every program runs under the VIP unit's environment (deploy/systemd/edge-ccm-vip.service).
 * Usage: bun bench/timer-wakeups.ts [--interval-ms=250] [--window-seconds=60] [--repeat=2]
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { numberOption as opt } from './args.ts';
import { unitEnvironment } from './deployed-env.ts';
import { LoadSampler } from './machine.ts';
import { mainThreadFigures as mainThread, stopProcess } from './proc-sampler.ts';

const intervalMs = opt('interval-ms', 250);
const windowS = opt('window-seconds', 60);
const repeat = opt('repeat', 2);
const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-timer-wakeups-'));
const env = { ...process.env, ...unitEnvironment('edge-ccm-vip.service') };

const NEVER = 'setInterval(() => {}, 1e9);';
const PROGRAMS: Record<string, string> = {
  'two jobs, one timer': `let n = 0; setInterval(() => { n++; n++; }, ${intervalMs});`,
  'two jobs, two timers': `let n = 0; setInterval(() => { n++; }, ${intervalMs}); setTimeout(() => setInterval(() => { n++; }, ${intervalMs}), ${Math.round(intervalMs / 3)});`,
  'idle TCP client': `await Bun.connect({ hostname: '127.0.0.1', port: Number(process.env.PLAIN_PORT), socket: { data() {} } }); ${NEVER}`,
  'idle TLS client': `const s = await Bun.connect({ hostname: '127.0.0.1', port: Number(process.env.TLS_PORT), tls: { rejectUnauthorized: false }, socket: { data() {} } }); s.write('GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'); ${NEVER}`,
  'idle UDP socket': `await Bun.udpSocket({ hostname: '127.0.0.1', port: 0, socket: { data() {} } }); ${NEVER}`,
  nothing: NEVER,
};

/** The servers the clients connect to: plain and TLS, with a throwaway self-signed certificate. */
const servers = `
const cert = ${JSON.stringify(selfSigned())};
const plain = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('ok') });
const tls = Bun.serve({ hostname: '127.0.0.1', port: 0, tls: cert, fetch: () => new Response('ok') });
console.log(JSON.stringify({ plain: plain.port, tls: tls.port }));`;

function selfSigned(): { cert: string; key: string } {
  const made = Bun.spawnSync(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', join(dir, 'k.pem'), '-out', join(dir, 'c.pem'), '-days', '1', '-subj', '/CN=127.0.0.1'], { stderr: 'pipe' });
  if (made.exitCode !== 0) throw new Error(`openssl (apt-get install openssl): ${made.stderr.toString()}`);
  return { cert: readFileSync(join(dir, 'c.pem'), 'utf8'), key: readFileSync(join(dir, 'k.pem'), 'utf8') };
}

writeFileSync(join(dir, 'servers.ts'), servers);
const server = Bun.spawn({ cmd: [process.execPath, join(dir, 'servers.ts')], stdout: 'pipe', stderr: 'inherit' });
try {
  const reader = server.stdout.getReader();
  const ports = JSON.parse(new TextDecoder().decode((await reader.read()).value)) as { plain: number; tls: number };
  console.log(`interval ${intervalMs} ms, window ${windowS} s, ${repeat} repetitions; main thread of each program, per minute\n`);
  console.log('| program | rep | CPU-ms/min | wake-ups/min | CPU-us per wake-up | load avg |\n|---|---|---|---|---|---|');
  for (let rep = 1; rep <= repeat; rep++) {
    const names = Object.keys(PROGRAMS);
    const procs = names.map((name, i) => {
      const file = join(dir, `p${i}.ts`);
      writeFileSync(file, PROGRAMS[name]!);
      return Bun.spawn({ cmd: [process.execPath, file], env: { ...env, PLAIN_PORT: String(ports.plain), TLS_PORT: String(ports.tls) }, stdout: 'ignore', stderr: 'inherit' });
    });
    try {
      await Bun.sleep(5000); // started, connected
      const load = new LoadSampler();
      const before = procs.map((p) => mainThread(p.pid));
      await Bun.sleep(windowS * 1000);
      const after = procs.map((p) => mainThread(p.pid));
      const l = load.stop();
      names.forEach((name, i) => {
        const cpuMs = ((after[i]!.cpuNs - before[i]!.cpuNs) / 1e6) * (60 / windowS);
        const wakes = (after[i]!.sleeps - before[i]!.sleeps) * (60 / windowS);
        console.log(`| ${name} | ${rep} | ${cpuMs.toFixed(1)} | ${wakes.toFixed(0)} | ${wakes > 0 ? ((cpuMs * 1000) / wakes).toFixed(0) : '-'} | ${l.mean.toFixed(1)} |`);
      });
    } finally {
      await Promise.all(procs.map((p) => stopProcess(p)));
    }
  }
} finally {
  await stopProcess(server);
  rmSync(dir, { recursive: true, force: true });
}
