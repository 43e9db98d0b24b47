import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { FLAGS, FLAG_GROUPS, renderFlagsMarkdown, renderHelp } from './index.ts';
import { FLAGS_DOC_PATH } from '../../scripts/gen-flags-doc.ts';
import { COMMANDS } from '../cmd/commands.ts';
import { helpWidth, wrap } from './help.ts';

/** Wide enough that nothing wraps: the layout tests below read each flag's help on one line. */
const UNWRAPPED = { width: 100_000, providers: ['static', 'proxmox'], commands: COMMANDS };

describe('renderHelp', () => {
  const help = renderHelp(UNWRAPPED);
  const lines = help.split('\n');
  /** The help line of a flag: it starts with "--name" (after a shorthand, if any). */
  const line = (name: string) => lines.find((l) => new RegExp(`^ +(-\\w, )?--${name}( |$)`).test(l)) ?? '';

  test('starts with the usage, as upstream, and lists the subcommands', () => {
    expect(help).toContain('\nUsage:\n  edge-ccm [flags]\n  edge-ccm [validate|selftest|speaker|vip|import] [flags]\n');
    for (const c of COMMANDS) expect(help).toContain(`\n  ${c.name} `);
  });

  test('--cloud-provider names the linked providers', () => {
    expect(line('cloud-provider')).toContain('Linked providers: static, proxmox.');
  });

  test('lists every flag once, with its type word', () => {
    for (const def of FLAGS) {
      const matching = lines.filter((l) => new RegExp(`^ +(-\\w, )?--${def.name}( |$)`).test(l));
      expect(matching).toHaveLength(1);
      expect(line(def.name)).toContain(def.help.split('\n')[0] as string);
    }
    expect(help).toContain('      --leader-elect-lease-duration duration ');
    expect(help).toContain('      --concurrent-node-syncs int32 ');
    expect(help).toContain('      --controllers strings ');
    expect(help).toContain('  -v, --v Level ');
    expect(help).toContain('  -h, --help ');
    expect(help).toContain('      --bind-address ip ');
  });

  test('shows defaults the way pflag does, and none for zero values', () => {
    expect(line('leader-elect-lease-duration')).toEndWith('(default 15s)');
    expect(line('node-status-update-frequency')).toEndWith('(default 5m0s)');
    expect(line('min-resync-period')).toEndWith('(default 12h0m0s)');
    expect(line('leader-elect-resource-namespace')).toEndWith('(default "kube-system")');
    expect(line('secure-port')).toEndWith('(default 10258)');
    expect(line('kube-api-qps')).toEndWith('(default 20)');
    expect(line('bind-address')).toEndWith('(default 0.0.0.0)');
    expect(line('authorization-always-allow-paths')).toEndWith('(default [/healthz,/readyz,/livez])');
    expect(line('leader-elect')).toEndWith('(default true)');
    expect(help).toContain('Disabled-by-default controllers: node-ipam-controller, node-csr-approval (default [*])');
    for (const name of ['cloud-provider', 'kubeconfig', 'allocate-node-cidrs', 'cluster-cidr', 'tls-cert-file']) {
      expect(line(name)).not.toContain('(default');
    }
  });

  test('groups flags in upstream sections, edge-ccm additions last', () => {
    const titles = lines.filter((line) => line.endsWith(' flags:'));
    expect(titles).toEqual([
      'Debugging flags:',
      'Leader-migration flags:',
      'Generic flags:',
      'Cloud-node-controller flags:',
      'Service-lb-controller flags:',
      'Nodeipam controller flags:',
      'Webhook flags:',
      'Webhook serving flags:',
      'Secure serving flags:',
      'Authentication flags:',
      'Authorization flags:',
      'Misc flags:',
      'Global flags:',
      'Edge-ccm flags:',
    ]);
    expect(titles.length).toBe(FLAG_GROUPS.length);
    const edge = help.slice(help.indexOf('Edge-ccm flags:'));
    expect(edge).toContain('--shutdown-grace-period duration');
  });

  test('aligns help texts within a section and indents continuation lines to match', () => {
    for (const group of ['Generic', 'Global', 'Secure serving']) {
      const defs = FLAGS.filter((def) => `${def.group.charAt(0).toUpperCase()}${def.group.slice(1)}` === group);
      const starts = defs.map((def) => line(def.name).indexOf(def.help.split('\n')[0] as string));
      expect(new Set(starts).size).toBe(1);
      // three spaces after the longest name and type, as pflag
      const gaps = defs.map((def, i) => (starts[i] ?? 0) - line(def.name).slice(0, starts[i]).trimEnd().length);
      expect(Math.min(...gaps)).toBe(3);
    }
    const controllers = lines.indexOf(line('controllers'));
    const column = line('controllers').indexOf('A list of controllers');
    expect(lines[controllers + 1]).toStartWith(`${' '.repeat(column)}All controllers: `);
  });
});

describe('--help wrapping', () => {
  test('no line passes the width, continuation lines keep the help column; 80 when not a terminal', () => {
    for (const width of [80, 120]) {
      const help = renderHelp({ ...UNWRAPPED, width });
      // A single word longer than the room may stand alone on its line (a long default list).
      const long = help.split('\n').filter((l) => l.length > width && /\S\s+\S/.test(l.trim()));
      expect(long).toEqual([]);
      const lines = help.split('\n');
      const i = lines.findIndex((l) => l.includes('--leader-elect-lease-duration duration'));
      const column = (lines[i] as string).indexOf('The duration that');
      expect(lines[i + 1]).toMatch(new RegExp(`^ {${column}}\\S`));
    }
    expect(helpWidth({ isTTY: false, columns: 200 })).toBe(80);
    expect(helpWidth({ isTTY: true, columns: 132 })).toBe(132);
  });

  test('too little room: the text goes as a block on the next line at column 16, as pflag', () => {
    expect(wrap('some help text', 70, 80)).toBe('\n                some help text');
  });

  test('words are never split; an explicit line break is kept', () => {
    expect(wrap('aaa bbb ccc ddd eee fff ggg hhh iii jjj kkk lll', 2, 30)).toBe('aaa bbb ccc ddd eee fff ggg\n  hhh iii jjj kkk lll');
    expect(wrap('one\ntwo', 4, 80)).toBe('one\n    two');
  });
});

describe('docs/flags.md', () => {
  test('has a row for every flag', () => {
    const markdown = renderFlagsMarkdown();
    for (const def of FLAGS) expect(markdown).toContain(`--${def.name}\``);
  });

  test('is up to date with the flag table (run: bun scripts/gen-flags-doc.ts)', () => {
    expect(readFileSync(FLAGS_DOC_PATH, 'utf8')).toBe(renderFlagsMarkdown());
  });
});
