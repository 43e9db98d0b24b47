/**
 * The L2 responder alone in a process, for tests that run it inside a node's network namespace
 * (`ip netns exec NODE bun test/fakes/l2-responder-main.ts`; Bun cannot enter a namespace itself).
 * Driven by JSON lines on stdin, answering on stdout:
 *   {"id":1,"announce":{"eth0":["198.51.100.200"]}}  -> {"id":1,"problems":[...]}
 *   {"id":2,"stats":true}                            -> {"id":2,"stats":{...},"announcements":{...},"announcing":[...]}
 * Every responder event is printed as {"event":{...}}; {"ready":true} once it listens to stdin.
 */
import { L2Responder } from '../../src/net/l2/responder.ts';

const print = (message: unknown) => process.stdout.write(`${JSON.stringify(message)}\n`);

const responder = new L2Responder({
  floodPauseMs: Number(process.env.L2_FLOOD_PAUSE_MS ?? 10),
  onEvent: (event) => print({ event }),
});

function handle(line: string): void {
  let request: { id?: number; announce?: Record<string, string[]>; stats?: boolean };
  try {
    request = JSON.parse(line);
  } catch {
    print({ error: `not JSON: ${line}` });
    return;
  }
  if (request.announce) {
    const problems = responder.setAnnouncements(new Map(Object.entries(request.announce)));
    print({ id: request.id, problems });
  } else if (request.stats) {
    print({ id: request.id, stats: responder.stats(), announcements: Object.fromEntries(responder.announcements()), announcing: responder.announcing() });
  } else {
    print({ id: request.id, error: 'expected "announce" or "stats"' });
  }
}

let pending = '';
process.stdin.on('data', (chunk: Buffer) => {
  pending += chunk.toString('utf8');
  for (let newline = pending.indexOf('\n'); newline >= 0; newline = pending.indexOf('\n')) {
    const line = pending.slice(0, newline).trim();
    pending = pending.slice(newline + 1);
    if (line) handle(line);
  }
});
// The test ending closes stdin: stop answering and exit.
process.stdin.on('end', () => {
  responder.close();
  process.exit(0);
});
print({ ready: true });
