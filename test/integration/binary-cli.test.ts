import { describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pkg from '../../package.json' with { type: 'json' };
import { ccmBinaryCommand, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { runToEnd } from '../harness/run-to-end.ts';

/**
 * The command line of the compiled binary (dist/edge-ccm), as users run it: the client checks of
 * `selftest` against the real API server, --version, --help, a bad flag, and `validate`.
 */


/** Runs the binary to its end; fails with the fix when it was not built. */
const run = (args: string[], timeoutMs = 60_000) => runToEnd(ccmBinaryCommand(args), { timeoutMs });

describe('dist/edge-ccm', () => {
  test('selftest passes every client check against the real API server', async () => {
    const cp = await sharedControlPlane();
    const kubeconfig = await cp.clientCertKubeconfig('selftest-admin', ['system:masters']);
    const { exitCode, output } = await run(['selftest', '--kubeconfig', kubeconfig], 120_000);
    expect({ exitCode, output }).toMatchObject({ exitCode: 0 });
    for (const check of ['list nodes', 'create', 'conflict on stale update', 'merge patch', 'strategic merge patch', 'json patch', 'server-side apply', 'delete', 'watch saw ADDED, MODIFIED and DELETED']) {
      expect(output).toContain(`ok   ${check}`);
    }
    expect(output).toContain('selftest passed');
  }, 240_000);

  test('--version prints the version and the commit it was built from', async () => {
    const { exitCode, output } = await run(['--version']);
    expect(exitCode).toBe(0);
    expect(output.trim()).toMatch(new RegExp(`^edge-ccm ${pkg.version.replaceAll('.', '\\.')} \\(commit [0-9a-f]{7,40}(-dirty)?, bun \\d+\\.\\d+\\.\\d+\\)$`));
  });

  test('--help lists the flags, with --cloud-provider', async () => {
    const { exitCode, output } = await run(['--help']);
    expect(exitCode).toBe(0);
    expect(output).toMatch(/^\s+--cloud-provider string\s/m);
    expect(output).toContain('--node-label-resync');
  });

  test('a misspelt validate flag or command: exit 2, named, with the one it is near', async () => {
    const flag = await run(['validate', '--cloud-provder', 'static', '--cloud-config', 'examples/inventory.yaml']);
    expect(flag.exitCode).toBe(2);
    expect(flag.output.trim().split('\n')).toEqual(['error: validate: unknown flag --cloud-provder (did you mean --cloud-provider?)']);
    const command = await run(['valdate']);
    expect(command.exitCode).toBe(2);
    expect(command.output).toContain('error: unknown command "valdate" (did you mean "validate"?)');
  });

  test('a bad flag value exits 2 naming the flag', async () => {
    const { exitCode, output } = await run(['--cloud-provider=static', '--node-monitor-period=5']);
    expect(exitCode).toBe(2);
    expect(output).toContain('error: --node-monitor-period:');
    expect(output).toContain("Run 'edge-ccm --help' for usage.");
  });

  test('validate reports every problem of a bad inventory with file and line, and exits 2 (as the daemon on that file)', async () => {
    const path = join(tempDir('edge-ccm-binary-cli-'), 'inventory.yaml');
    writeFileSync(path, [
      'inventory:',
      '  machines:',
      '    - id: m1',
      '      zoen: z1',
      'loadBalancer:',
      '  pools:',
      '    - name: p',
      '      addresses: [10.0.0.4/29]',
      '',
    ].join('\n'));
    const { exitCode, output } = await run(['validate', '--cloud-provider', 'static', '--cloud-config', path]);
    expect(exitCode).toBe(2);
    expect(output).toContain(`${path}:4: inventory.machines[0].zoen: unknown key "zoen" (did you mean "zone"?)`);
    expect(output).toMatch(new RegExp(`${path.replaceAll('.', '\\.')}:8: loadBalancer\\.pools\\[0\\]\\.addresses\\[0\\]: .*host bits`));
    expect(output).toContain('2 problems found');
  });
});

describe('the release binaries', () => {
  // ELF e_machine (offset 18, little endian): 62 = x86-64, 183 = AArch64.
  const machine = async (path: string) => new DataView(await Bun.file(path).slice(0, 20).arrayBuffer()).getUint16(18, true);
  test('dist/edge-ccm-linux-amd64 is an x86-64 executable and dist/edge-ccm-linux-arm64 an AArch64 one', async () => {
    const dist = join(import.meta.dir, '../../dist');
    for (const f of ['edge-ccm-linux-amd64', 'edge-ccm-linux-arm64']) {
      if (!(await Bun.file(join(dist, f)).exists())) throw new Error(`dist/${f} is missing: run \`bun run build\` first`);
    }
    expect(await machine(join(dist, 'edge-ccm-linux-amd64'))).toBe(62);
    expect(await machine(join(dist, 'edge-ccm-linux-arm64'))).toBe(183);
  });
});

describe('dist/edge-ccm --help', () => {
  test('lists the subcommands and the linked providers, wrapped at 80 columns when not a terminal', async () => {
    const { exitCode, output } = await run(['--help']);
    expect(exitCode).toBe(0);
    expect(output).toContain('\n  edge-ccm [validate|selftest|speaker|vip|import] [flags]\n');
    expect(output.replace(/\s+/g, ' ')).toContain('Linked providers: lxd, proxmox, static.');
    // Lines past 80 columns hold one word only (a gate or controller name longer than the room left).
    expect(output.split('\n').filter((l) => l.length > 80 && /\S\s+\S/.test(l.trim()))).toEqual([]);
  });

  test('validate --help and selftest --help print their usage and exit 0', async () => {
    for (const command of ['validate', 'selftest']) {
      const { exitCode, output } = await run([command, '--help']);
      expect({ command, exitCode }).toEqual({ command, exitCode: 0 });
      expect(output).toStartWith(`Usage:\n  edge-ccm ${command} `);
    }
  });
});
