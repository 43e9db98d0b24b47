/**
 * What one health check of `edge-ccm vip` costs (issue 38): each way of checking runs alone in a
 * process of its own, once per interval against one local TLS server that answers as a
 * kube-apiserver's /readyz (200 "ok", keep-alive), all ways at once, side by side; the CPU-s
 * (utime + stime from /proc, every thread) and the wake-ups (voluntary context switches, every
 * thread) of each over a window, with the load average. The server runs in this process (not
 * counted).
 *
 *   bun bench/vip-health-check-cost.ts [--interval-ms=250] [--seconds=60] [--mode=NAME]...
 *
 * Modes: `idle` (a timer every interval, no check: the floor), `connection` (health.ts's check:
 * health-connection.ts, a kept-alive socket of its own), `fetch` (the check before: Bun's fetch),
 * and each `-verified` (the CA and a client certificate, as controlPlaneEndpoint.healthCheck
 * sets them). Default: all.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:https';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { HealthConnection, type HealthRequest } from '../src/announce/vip/health-connection.ts';
import { createCertificateAuthority, issueCertificate } from '../test/harness/certs.ts';
import { cpuSeconds, threadWakeups, voluntarySwitches, voluntarySwitchesByThread } from './proc-sampler.ts';
import { option as opt } from './args.ts';

const argv = process.argv.slice(2);
const intervalMs = Number(opt('interval-ms') ?? 250);
const seconds = Number(opt('seconds') ?? 60);
const MODES = ['idle', 'fetch', 'fetch-verified', 'connection', 'connection-verified'] as const;

/** The check as it was before 2026-11-29 (health.ts at 33caf41), for comparison: Bun's fetch, its connection pooled, a timer cleared once answered. */
async function fetchStatus(url: string, timeoutMs: number, request: HealthRequest): Promise<string> {
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(), timeoutMs);
  try {
    const response = await fetch(url, { signal: timeout.signal, tls: request.tls, headers: request.headers, redirect: 'manual' } as RequestInit);
    await response.body?.cancel();
    return String(response.status);
  } catch (e) {
    return timeout.signal.aborted ? `timeout after ${timeoutMs} ms` : String(e);
  } finally {
    clearTimeout(timer);
  }
}
type Mode = (typeof MODES)[number];

if (opt('role') === 'client') {
  const mode = opt('mode') as Mode;
  const url = opt('url')!;
  const request: HealthRequest = mode.endsWith('-verified')
    ? { tls: { rejectUnauthorized: true, ca: await Bun.file(opt('ca')!).text(), cert: await Bun.file(opt('cert')!).text(), key: await Bun.file(opt('key')!).text() }, headers: {} }
    : { tls: { rejectUnauthorized: false }, headers: {} };
  const connection = new HealthConnection(url, request);
  const check = mode.startsWith('fetch') ? () => fetchStatus(url, 2000, request) : () => connection.check(2000);
  let last = '';
  let bad = 0;
  // As ApiServerHealth schedules: the next one interval after the previous started.
  const tick = async () => {
    const started = performance.now();
    if (mode !== 'idle') {
      last = await check();
      if (last !== '200') bad += 1;
    }
    setTimeout(tick, Math.max(0, intervalMs - (performance.now() - started)));
  };
  void tick();
  process.on('SIGTERM', () => {
    console.log(JSON.stringify({ mode, last, bad }));
    process.exit(0);
  });
} else {
  const modes = (argv.filter((a) => a.startsWith('--mode=')).map((a) => a.slice(7)) as Mode[]);
  for (const m of modes) if (!MODES.includes(m)) throw new Error(`--mode=${m}: one of ${MODES.join(', ')}`);
  const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-health-cost-'));
  try {
    const ca = await createCertificateAuthority(dir, 'ca', 'bench-ca');
    const serving = await issueCertificate(ca, dir, 'apiserver', { commonName: 'kube-apiserver', usage: 'server', dnsNames: ['kubernetes'], ipAddresses: ['127.0.0.1'] });
    const client = await issueCertificate(ca, dir, 'client', { commonName: 'vip', usage: 'client' });
    // As kube-apiserver answers /readyz: 200, text/plain, "ok", a Content-Length, kept alive.
    const server = createServer({ key: serving.keyPem, cert: serving.certPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: false }, (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'no-cache, private', 'Content-Length': '2' }).end('ok');
    });
    const url = await new Promise<string>((resolve) => server.listen(0, '127.0.0.1', () => resolve(`https://127.0.0.1:${(server.address() as { port: number }).port}/readyz`)));
    const clients = (modes.length ? modes : MODES).map((mode) => ({
      mode,
      proc: Bun.spawn({ cmd: [process.execPath, import.meta.path, '--role=client', `--mode=${mode}`, `--url=${url}`, `--interval-ms=${intervalMs}`, `--ca=${ca.certPath}`, `--cert=${client.certPath}`, `--key=${client.keyPath}`], stdout: 'pipe', stderr: 'inherit' }),
    }));
    await Bun.sleep(5000); // started, first connection made, code warmed
    const at0 = clients.map((c) => ({ cpu: cpuSeconds(c.proc.pid), woken: voluntarySwitches(c.proc.pid), byThread: voluntarySwitchesByThread(c.proc.pid) }));
    const load0 = loadavg()[0]!;
    await Bun.sleep(seconds * 1000);
    const load1 = loadavg()[0]!;
    const checks = (seconds * 1000) / intervalMs;
    console.log(`interval ${intervalMs} ms, ${seconds} s, load ${load0.toFixed(1)}-${load1.toFixed(1)}`);
    console.log('| mode | CPU-s/min | CPU-ms per check above idle | wake-ups/s | by thread | last outcome, failures |\n|---|---|---|---|---|---|');
    const rows = clients.map((c, i) => ({ ...c, cpuPerMin: ((cpuSeconds(c.proc.pid) - at0[i]!.cpu) * 60) / seconds, woken: (voluntarySwitches(c.proc.pid) - at0[i]!.woken) / seconds, threads: threadWakeups(at0[i]!.byThread, voluntarySwitchesByThread(c.proc.pid), seconds) }));
    const idle = rows.find((r) => r.mode === 'idle')?.cpuPerMin ?? 0;
    for (const r of rows) {
      r.proc.kill('SIGTERM');
      const out = (await new Response(r.proc.stdout).text()).trim();
      const perCheck = r.mode === 'idle' ? '-' : (((r.cpuPerMin - idle) / 60) * seconds * 1000 / checks).toFixed(3);
      console.log(`| ${r.mode} | ${r.cpuPerMin.toFixed(3)} | ${perCheck} | ${r.woken.toFixed(1)} | ${r.threads} | ${out} |`);
    }
    server.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
