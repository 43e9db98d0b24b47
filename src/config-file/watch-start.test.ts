import { expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../log.ts';
import { WatchedConfig } from './watch.ts';

/**
 * A standby replica reads its config file when the process starts but starts watching it only
 * when it becomes leader, maybe hours later. Found by the fault soak (seed 1178847580): a standby
 * that took over 3 minutes after it started judged nodes against the inventory of its start and
 * deleted a node whose machine had been put back in the file meanwhile.
 */
const cases: { name: string; edit?: string; applied: number[] }[] = [
  { name: 'starting to watch applies an edit made since the text in force was read', edit: '2', applied: [2] },
  { name: 'starting to watch an unchanged file applies nothing', applied: [] },
];
test.each(cases)('$name', async ({ edit, applied: expected }) => {
  const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-watch-start-'));
  try {
    const path = join(dir, 'config.yaml');
    writeFileSync(path, '1');
    const applied: number[] = [];
    const file = new WatchedConfig<number>({
      owner: 'test provider',
      path,
      initialText: '1', // what the process read at its start
      load: (text) => ({ ok: true, config: Number(text) }),
      apply: (n) => applied.push(n),
      logger: silentLogger,
      pollMs: 60_000, // no poll in this test: only start() may notice
    });
    if (edit !== undefined) writeFileSync(path, edit); // edited while the process was a standby
    await file.start();
    try {
      expect(applied).toEqual(expected);
    } finally {
      file.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
