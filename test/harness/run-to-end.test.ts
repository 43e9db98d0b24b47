import { expect, test } from 'bun:test';
import { runToEnd } from './run-to-end.ts';

test('a command still running at the bound is killed, reported as killed, with what it printed before', async () => {
  // exec: the shell becomes sleep, so the killed pid is the one holding the pipes.
  const hung = await runToEnd(['sh', '-c', 'echo started; exec sleep 30'], { timeoutMs: 500 });
  expect(hung).toEqual({ exitCode: 137, stdout: 'started\n', stderr: '', output: 'started\n', killed: true });
});

test('a command that ends: its exit code, stdout and stderr apart and together; stdin, env and cwd given', async () => {
  const script = 'cat; echo "$RUN_TO_END_VALUE ${HOME-unset} $PWD" >&2; exit 3';
  const ended = await runToEnd(['sh', '-c', script], { timeoutMs: 30_000, stdin: 'from stdin\n', env: { RUN_TO_END_VALUE: 'set', HOME: undefined }, cwd: '/tmp' });
  expect(ended).toMatchObject({ exitCode: 3, stdout: 'from stdin\n', stderr: 'set unset /tmp\n', killed: false });
  // Which pipe is read first when both have data is up to the event loop: the order is not asserted.
  expect(ended.output.split('\n').sort()).toEqual(['', 'from stdin', 'set unset /tmp']);
});
