/**
 * The debugging endpoints upstream's controller managers install beside /healthz (controller-
 * manager's NewBaseHandler), all behind delegated authentication and authorization:
 * - /configz: the versioned component config (configz.ts), always;
 * - with --profiling (default on), what Bun can give under Go's pprof paths:
 *   /debug/pprof/            an index of what is here
 *   /debug/pprof/heap        a V8 heap snapshot (Bun.generateHeapSnapshot), for Chrome DevTools' Memory tab
 *   /debug/pprof/profile     a CPU profile over ?seconds=N (default 30, as Go), a .cpuprofile from the
 *                            inspector's sampling profiler, for DevTools' Performance tab or speedscope
 *   /debug/pprof/block       with --contention-profiling: how long the event loop was blocked (JSON)
 * Go's goroutine, mutex, allocs and trace profiles have no counterpart here and answer 404.
 */
import type { Hono } from 'hono';
import { Session } from 'node:inspector';
import type { Logger } from '../log.ts';
import type { Options } from '../options/index.ts';
import type { ServerEnv } from '../server/types.ts';
import { EventLoopLag } from '../util/event-loop-lag.ts';
import { configz } from './configz.ts';

const DEFAULT_PROFILE_SECONDS = 30;
/** A longer profile would outlive any sensible client timeout; Go has no cap but the server's write timeout. */
const MAX_PROFILE_SECONDS = 600;

export function installDebugHandlers(app: Hono<ServerEnv>, options: Options, logger: Logger): void {
  const body = JSON.stringify(configz(options));
  app.get('/configz', () => new Response(body, { headers: { 'content-type': 'application/json', 'x-content-type-options': 'nosniff' } }));
  if (!options.profiling) return;

  const lag = options.contentionProfiling ? new EventLoopLag() : undefined;
  let profiling = false;
  app.get('/debug/pprof', (c) => c.redirect('/debug/pprof/', 301));
  app.get('/debug/pprof/', (c) =>
    c.text(
      'edge-ccm profiles (Bun runtime; not Go pprof format):\n' +
        '  heap     V8 heap snapshot (.heapsnapshot)\n' +
        `  profile  CPU profile (.cpuprofile), ?seconds=N (default ${DEFAULT_PROFILE_SECONDS})\n` +
        (lag ? '  block    event-loop blocking since start (JSON)\n' : ''),
    ),
  );
  app.get('/debug/pprof/heap', () => {
    logger.info('heap snapshot requested');
    const snapshot = Bun.generateHeapSnapshot('v8');
    return new Response(snapshot, { headers: { 'content-type': 'application/json', 'content-disposition': 'attachment; filename="edge-ccm.heapsnapshot"' } });
  });
  app.get('/debug/pprof/profile', async (c) => {
    const text = c.req.query('seconds');
    const seconds = text === undefined ? DEFAULT_PROFILE_SECONDS : Number(text);
    if (!Number.isInteger(seconds) || seconds <= 0 || seconds > MAX_PROFILE_SECONDS) {
      return c.text(`seconds must be a whole number from 1 to ${MAX_PROFILE_SECONDS}\n`, 400);
    }
    if (profiling) return c.text('Could not enable CPU profiling: cpu profiling already in use\n', 500);
    profiling = true;
    try {
      logger.info('CPU profile requested', { seconds });
      const profile = await cpuProfile(seconds * 1000, c.req.raw.signal);
      return new Response(JSON.stringify(profile), { headers: { 'content-type': 'application/json', 'content-disposition': 'attachment; filename="edge-ccm.cpuprofile"' } });
    } finally {
      profiling = false;
    }
  });
  if (lag) app.get('/debug/pprof/block', (c) => c.json(lag.report()));
}

/** Samples the CPU for `ms` (less if the client goes away) through the inspector protocol. */
async function cpuProfile(ms: number, signal: AbortSignal): Promise<unknown> {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<Record<string, unknown>>((resolve, reject) => session.post(method, params ?? {}, (err, result) => (err ? reject(err) : resolve(result as Record<string, unknown>))));
  try {
    await post('Profiler.enable');
    await post('Profiler.start');
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
    });
    const { profile } = await post('Profiler.stop');
    return profile;
  } finally {
    session.disconnect();
  }
}
