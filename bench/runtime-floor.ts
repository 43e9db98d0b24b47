/**
 * The runtime's floor for the VIP's idle work (issue 38): what a compiled Bun program costs doing
 * only what `edge-ccm vip` does at idle, layer by layer, beside a Go program doing the same (the
 * language kube-vip and MetalLB are written in). No edge-ccm code runs here: the figures say how
 * much of the VIP's RSS and idle CPU any Bun program doing that job pays.
 *
 * The layers, each adding to the one before (one compiled binary, the layers chosen by LAYERS):
 *   empty   waits, nothing else (the floor bench/footprint.ts states: 26 MiB)
 *   serve   + an HTTP server on loopback, never asked (the metrics and health endpoint)
 *   udp     + a UDP socket sending a 64-byte datagram every interval and receiving two (the
 *           heartbeats of a three-host VIP: each host hears the other two)
 *   check   + a GET over TLS of a /readyz every interval, the connection kept alive, a timer
 *           cleared on the answer (src/announce/vip/health.ts does the same)
 *   ffi     + bun:ffi loaded and called once (the raw ARP/NDP socket needs it)
 * and `go`: one Go program doing serve + udp + check (net/http, net, crypto/tls; stdlib only).
 * The TLS server and the UDP peer are this process's (their cost is not counted).
 *
 *   bun bench/runtime-floor.ts [--interval-ms=250] [--settle-seconds=20] [--idle-seconds=60]
 *     [--env=NAME=V,...]   extra environment for the Bun programs, e.g. BUN_JSC_useDFGJIT=0 (a second set)
 *
 * Prints a Markdown table: RSS after settling and after the idle window, anonymous, CPU-seconds a
 * minute, voluntary context switches a second by thread name (wake-ups), the load average.
 */
import { mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCertificateAuthority, issueCertificate } from '../test/harness/certs.ts';
import { idleWindow, stopProcess } from './proc-sampler.ts';
import { stringOption as opt } from './args.ts';
import { compileProgram } from './compile-program.ts';

const args = process.argv.slice(2);
const INTERVAL_MS = Number(opt('interval-ms', '250'));
const SETTLE_S = Number(opt('settle-seconds', '20'));
const IDLE_S = Number(opt('idle-seconds', '60'));
const EXTRA_ENV = opt('env', '');
for (const [name, v] of [['interval-ms', INTERVAL_MS], ['settle-seconds', SETTLE_S], ['idle-seconds', IDLE_S]] as const) {
  if (!(v > 0)) throw new Error(`--${name}=${opt(name, '')}: a positive number`);
}
const GO = process.env.GO ?? '/usr/local/go/bin/go';

// An async function, not top-level await: a --bytecode build is CommonJS.
const BUN_PROGRAM = `(async () => {
const layers = new Set((process.env.LAYERS ?? '').split(',').filter(Boolean));
const every = Number(process.env.INTERVAL_MS);
setInterval(() => {}, 1 << 30);
if (layers.has('serve')) Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('ok\\n') });
if (layers.has('udp')) {
  const payload = new Uint8Array(64);
  const peer = Number(process.env.PEER_PORT);
  const socket = await Bun.udpSocket({ hostname: '127.0.0.1', socket: { data() {} } });
  console.log('udp ' + socket.port);
  setInterval(() => socket.send(payload, peer, '127.0.0.1'), every);
}
if (layers.has('check')) {
  const url = process.env.CHECK_URL;
  const check = async () => {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), 200);
    try {
      const r = await fetch(url, { signal: abort.signal, tls: { rejectUnauthorized: false } });
      await r.body?.cancel();
    } catch {}
    clearTimeout(timer);
    setTimeout(check, every);
  };
  void check();
}
if (layers.has('ffi')) {
  const { dlopen, FFIType } = await import('bun:ffi');
  dlopen('libc.so.6', { getpid: { returns: FFIType.i32 } }).symbols.getpid();
}
console.log('ready');
})();
`;

const GO_PROGRAM = `package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	every, _ := strconv.Atoi(os.Getenv("INTERVAL_MS"))
	interval := time.Duration(every) * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\\n") }))
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		panic(err)
	}
	fmt.Printf("udp %d\\n", conn.LocalAddr().(*net.UDPAddr).Port)
	peerPort, _ := strconv.Atoi(os.Getenv("PEER_PORT"))
	peer := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: peerPort}
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := conn.ReadFromUDP(buf); err != nil {
				return
			}
		}
	}()
	go func() {
		payload := make([]byte, 64)
		for range time.Tick(interval) {
			conn.WriteToUDP(payload, peer)
		}
	}()
	client := &http.Client{Timeout: 200 * time.Millisecond, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	fmt.Println("ready")
	for {
		if r, err := client.Get(os.Getenv("CHECK_URL")); err == nil {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
		time.Sleep(interval)
	}
}
`;

function run(cmd: string[], cwd: string, env: Record<string, string> = {}): void {
  const r = Bun.spawnSync(cmd, { cwd, env: { ...process.env, ...env }, stdout: 'pipe', stderr: 'pipe' });
  if (r.exitCode !== 0) throw new Error(`${cmd.join(' ')} (in ${cwd}) exited ${r.exitCode}: ${r.stderr.toString().slice(-2000)}`);
}

interface Variant { name: string; cmd: string[]; env: Record<string, string> }
interface Running { variant: Variant; proc: Bun.Subprocess<'ignore', 'pipe', 'pipe'>; udpPort?: number }

const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-runtime-floor-'));
const running: Running[] = [];
let server: ReturnType<typeof Bun.serve> | undefined;
let peer: { port: number; send(data: Uint8Array, port: number, address: string): boolean; close(): void } | undefined;
let sender: ReturnType<typeof setInterval> | undefined;
try {
  writeFileSync(join(dir, 'floor.ts'), BUN_PROGRAM);
  compileProgram(join(dir, 'floor.ts'), join(dir, 'bun-floor'));
  writeFileSync(join(dir, 'main.go'), GO_PROGRAM);
  writeFileSync(join(dir, 'go.mod'), 'module floor\n\ngo 1.24\n');
  run([GO, 'build', '-trimpath', '-o', 'go-floor', '.'], dir, { CGO_ENABLED: '0', GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local' });

  const ca = await createCertificateAuthority(dir, 'ca', 'runtime-floor ca');
  const cert = await issueCertificate(ca, dir, 'server', { commonName: '127.0.0.1', usage: 'server', ipAddresses: ['127.0.0.1'] });
  server = Bun.serve({ hostname: '127.0.0.1', port: 0, tls: { cert: cert.certPem, key: cert.keyPem }, fetch: () => new Response('ok') });
  const udpPeer = await Bun.udpSocket({ hostname: '127.0.0.1', socket: { data() {} } });
  peer = udpPeer;

  const layers = ['empty', 'serve', 'serve,udp', 'serve,udp,check', 'serve,udp,check,ffi'];
  const envSets: Record<string, string>[] = [{}];
  if (EXTRA_ENV) envSets.push(Object.fromEntries(EXTRA_ENV.split(',').map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])));
  const variants: Variant[] = envSets.flatMap((env) => layers.map((l) => ({
    name: `bun: ${l === 'empty' ? 'empty' : l.replaceAll(',', ' + ')}${Object.keys(env).length ? ` (${EXTRA_ENV})` : ''}`,
    cmd: [join(dir, 'bun-floor')],
    env: { ...env, LAYERS: l === 'empty' ? '' : l },
  })));
  variants.push({ name: 'go: serve + udp + check', cmd: [join(dir, 'go-floor')], env: {} });

  const common = { INTERVAL_MS: String(INTERVAL_MS), PEER_PORT: String(udpPeer.port), CHECK_URL: `https://127.0.0.1:${server.port}/readyz` };
  for (const variant of variants) {
    const proc = Bun.spawn(variant.cmd, { env: { ...process.env, ...common, ...variant.env }, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
    running.push({ variant, proc });
  }
  // Each program's first lines: its UDP port (when it has one), then "ready".
  await Promise.all(running.map(async (r) => {
    const reader = r.proc.stdout.getReader();
    let text = '';
    const deadline = Date.now() + 30_000;
    while (!text.includes('ready\n')) {
      if (Date.now() > deadline) throw new Error(`${r.variant.name}: not ready in 30 s (stdout: ${text})`);
      const { value, done } = await reader.read();
      if (done) throw new Error(`${r.variant.name} exited: ${await new Response(r.proc.stderr).text()}`);
      text += new TextDecoder().decode(value);
    }
    reader.releaseLock();
    const port = /^udp (\d+)$/m.exec(text)?.[1];
    if (port) r.udpPort = Number(port);
  }));
  // Two datagrams an interval to each program with a socket: the heartbeats of two other hosts.
  const heartbeat = new Uint8Array(64);
  sender = setInterval(() => {
    for (const r of running) if (r.udpPort) for (let i = 0; i < 2; i += 1) udpPeer.send(heartbeat, r.udpPort, '127.0.0.1');
  }, INTERVAL_MS);

  await Bun.sleep(SETTLE_S * 1000);
  const { figures, load } = await idleWindow(running.map((r) => r.proc.pid), IDLE_S);
  console.log(`\nruntime floor, ${INTERVAL_MS} ms interval, ${SETTLE_S} s settle, ${IDLE_S} s idle, ${new Date().toISOString()}\n`);
  console.log('| program | RSS after settle (MiB) | RSS after idle | anonymous | touched in the idle window (of it machine code) | idle CPU-s/min | wake-ups/s by thread | load |');
  console.log('|---|---|---|---|---|---|---|---|');
  running.forEach((r, i) => {
    if (r.proc.exitCode !== null) throw new Error(`${r.variant.name} exited ${r.proc.exitCode}`);
    const f = figures[i]!;
    console.log(`| ${r.variant.name} | ${f.rssStart.toFixed(1)} | ${f.rssEnd.toFixed(1)} | ${f.anonEnd.toFixed(1)} | ${f.referenced.toFixed(1)} (${f.referencedCode.toFixed(1)}) | ${f.cpuPerMinute.toFixed(3)} | ${f.byThread || '-'} | ${load} |`);
  });
} finally {
  clearInterval(sender);
  for (const r of running) await stopProcess(r.proc, 5_000);
  peer?.close();
  server?.stop(true);
  rmSync(dir, { recursive: true, force: true });
}
