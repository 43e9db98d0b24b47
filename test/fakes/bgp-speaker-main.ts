/**
 * The BGP speaker as a child process for tests that put it in a network namespace (Bun cannot
 * enter one in-process; `ip netns exec` runs this file there). Driven by JSON lines on stdin:
 *   {"id":1,"op":"start","config":{...SpeakerConfig},"announcements":[...]}   (announcements optional: the table to start with)
 *   {"id":2,"op":"announce","announcements":[...]}
 *   {"id":3,"op":"reconfigure","config":{...}}
 *   {"id":4,"op":"stats"}
 *   {"id":5,"op":"stop","graceful":true}
 * Each gets {"id":N,"ok":true,...} or {"id":N,"ok":false,"error":"..."} on stdout; state changes
 * are {"event":"state",...}. Logs go to stderr.
 */
import { createLogger } from '../../src/log.ts';
import { BgpSpeaker } from '../../src/net/bgp/speaker.ts';

const log = createLogger({ format: 'json', verbosity: 2 });
let speaker: BgpSpeaker | undefined;

function reply(message: object): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

async function handle(cmd: { id: number; op: string; [k: string]: unknown }): Promise<object> {
  switch (cmd.op) {
    case 'start':
      speaker = await BgpSpeaker.start(cmd.config as never, { log, ...(cmd.announcements ? { announcements: cmd.announcements as never } : {}), onStateChange: (c) => reply({ event: 'state', ...c }) });
      return {};
    case 'announce':
      speaker!.setAnnouncements(cmd.announcements as never);
      return {};
    case 'reconfigure':
      speaker!.reconfigure(cmd.config as never);
      return {};
    case 'stats':
      return { stats: speaker!.stats(), cpuMicros: process.cpuUsage(), rssBytes: process.memoryUsage.rss() };
    case 'stop':
      await speaker?.stop({ graceful: cmd.graceful === true });
      setTimeout(() => process.exit(0), 50);
      return {};
    default:
      throw new Error(`unknown op ${cmd.op}`);
  }
}

// Commands run one after another, in the order they came.
let queue: Promise<unknown> = Promise.resolve();
let buffered = '';
for await (const chunk of Bun.stdin.stream()) {
  buffered += new TextDecoder().decode(chunk);
  let nl: number;
  while ((nl = buffered.indexOf('\n')) >= 0) {
    const line = buffered.slice(0, nl);
    buffered = buffered.slice(nl + 1);
    if (!line.trim()) continue;
    const cmd = JSON.parse(line);
    queue = queue.then(() =>
      handle(cmd).then(
        (r) => reply({ id: cmd.id, ok: true, ...r }),
        (e) => reply({ id: cmd.id, ok: false, error: e instanceof Error ? e.message : String(e) }),
      ),
    );
  }
}
// stdin closed: the test is gone.
process.exit(0);
