import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Where the process logger's lines land, read from the real file descriptors of a child process:
 * with --log-text-split-stream / --log-json-split-stream (and the LoggingAlphaOptions gate, as
 * upstream asks) info goes to stdout and warnings and errors to stderr; otherwise all to stderr.
 */

const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-logging-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const script = join(dir, 'log.ts');
writeFileSync(script, [
  `import { parseArgs } from ${JSON.stringify(join(import.meta.dir, '../options/index.ts'))};`,
  `import { loggerFromOptions } from ${JSON.stringify(join(import.meta.dir, 'logging.ts'))};`,
  `const logger = loggerFromOptions(parseArgs(['--cloud-provider=static', ...process.argv.slice(2)]).options);`,
  `logger.info('an info %s line');`,
  `logger.warn('a warning');`,
  `logger.error('an error');`,
  `process.exit(0);`,
].join('\n'));

function run(...flags: string[]): { stdout: string[]; stderr: string[] } {
  const r = Bun.spawnSync([process.execPath, script, ...flags], { stdout: 'pipe', stderr: 'pipe' });
  expect(r.exitCode).toBe(0);
  const lines = (b: Buffer) => b.toString().split('\n').filter(Boolean);
  return { stdout: lines(r.stdout), stderr: lines(r.stderr) };
}

test('unsplit, every line goes to stderr, as written (no %-formatting)', () => {
  const { stdout, stderr } = run();
  expect(stdout).toEqual([]);
  expect(stderr).toHaveLength(3);
  expect(stderr[0]).toMatch(/ INFO "an info %s line"$/);
  expect(stderr[1]).toMatch(/ WARN "a warning"$/);
  expect(stderr[2]).toMatch(/ ERROR "an error"$/);
});

test('--log-text-split-stream: info to stdout, warnings and errors to stderr', () => {
  const { stdout, stderr } = run('--feature-gates=LoggingAlphaOptions=true', '--log-text-split-stream=true');
  expect(stdout).toHaveLength(1);
  expect(stdout[0]).toMatch(/ INFO "an info %s line"$/);
  expect(stderr.map((l) => l.split(' ')[1])).toEqual(['WARN', 'ERROR']);
});

test('--log-json-split-stream: the same split, one JSON object a line', () => {
  const { stdout, stderr } = run('--feature-gates=LoggingAlphaOptions=true', '--logging-format=json', '--log-json-split-stream=true');
  expect(stdout.map((l) => JSON.parse(l).msg)).toEqual(['an info %s line']);
  expect(stderr.map((l) => JSON.parse(l).level)).toEqual(['warn', 'error']);
});
