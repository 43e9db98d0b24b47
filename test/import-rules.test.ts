import { describe, expect, test } from 'bun:test';
import { Glob } from 'bun';
import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';

/**
 * The import rule of docs/architecture.md, read from the code: every relative import of every
 * source file (tests aside) goes one way, down the rooms, never into a sibling controller or
 * provider, never into test/. A new room, or a new arrow between rooms, is a decision: make it
 * here and in docs/architecture.md together.
 */

const ROOT = resolve(import.meta.dir, '..');

const BASE = ['src/util', 'src/log.ts'];
/** What each room may import besides itself; most specific room first. */
const ALLOWED: [room: string, may: string[]][] = [
  ['src/util', []],
  ['src/log.ts', ['src/util']],
  ['src/version.ts', []],
  ['src/systemd', BASE],
  ['src/net/bgp', ['src/net', ...BASE]],
  ['src/net/bfd', ['src/net', ...BASE]],
  ['src/net/l2', ['src/net', ...BASE]],
  ['src/net', BASE],
  ['src/kube', BASE],
  ['src/cloud', ['src/kube', 'src/net', ...BASE]],
  ['src/server', ['src/kube', ...BASE]],
  ['src/controllers/types.ts', ['src/cloud', 'src/kube', ...BASE]],
  ['src/status', ['src/controllers/types.ts', 'src/cloud', 'src/kube', 'src/net', ...BASE]],
  // A controller knows the cloud contract and Kubernetes, never another controller nor a provider.
  ['src/controllers/', ['src/controllers/types.ts', 'src/status/breaker-link.ts', 'src/status/resources.ts', 'src/cloud', 'src/kube', 'src/net', ...BASE]],
  // The address core every provider reads: the config file, the pools, the sections.
  ['src/config-file', ['src/cloud', 'src/kube', ...BASE]],
  ['src/lb', ['src/config-file', 'src/cloud', 'src/kube', 'src/net', ...BASE]],
  // Announcing addresses (BGP from the leader, ARP/NDP from every node): the pools, packets and Kubernetes.
  ['src/announce', ['src/lb', 'src/config-file', 'src/server', 'src/cloud', 'src/kube', 'src/net', ...BASE]],
  ['src/config-sections.ts', ['src/announce', 'src/lb', 'src/config-file', 'src/cloud', 'src/kube', 'src/net', ...BASE]],
  // A provider: the core and the contract; never another provider.
  ['providers/', ['src/config-sections.ts', 'src/announce', 'src/lb', 'src/config-file', 'src/cloud', 'src/kube', 'src/net', ...BASE]],
  ['src/migrate', ['src/lb', 'src/net', ...BASE]],
  // The flags: parsers of the rooms whose values they check, the lifecycle's defaults, and the controller table's names.
  ['src/options', ['src/net', 'src/server', 'src/controllers/nodelifecycle/options.ts', 'src/app/controllers.ts', ...BASE]],
  ['src/app', ['src/options', 'src/controllers', 'src/status', 'src/announce', 'src/server', 'src/systemd', 'src/cloud', 'src/kube', 'src/net', 'src/version.ts', ...BASE]],
  ['src/providers.ts', ['providers/static/index.ts', 'providers/proxmox/index.ts', 'src/cloud']],
  ['src/cmd', ['src/app', 'src/options', 'src/announce', 'src/migrate', 'src/lb', 'src/config-file', 'src/cloud', 'src/kube', 'src/net', 'src/version.ts', ...BASE]],
  ['src/main.ts', ['src/cmd', 'src/cloud', 'src/providers.ts']],
];

/** The room a path belongs to: each controller folder and each provider folder is a room of its own. */
function roomOf(path: string): string {
  const parts = path.split('/');
  if (parts[0] === 'providers') return parts.slice(0, 2).join('/');
  if (path === 'src/controllers/types.ts') return path;
  if (parts[0] === 'src' && (parts[1] === 'controllers' || parts[1] === 'net') && parts.length > 3) return parts.slice(0, 3).join('/');
  return parts.length > 2 ? parts.slice(0, 2).join('/') : path;
}

function rulesFor(room: string): string[] | undefined {
  return ALLOWED.find(([r]) => (r.endsWith('/') ? room.startsWith(r) : room === r || room.startsWith(`${r}/`)))?.[1];
}

function permitted(from: string, to: string): boolean {
  const room = roomOf(from);
  if (roomOf(to) === room) return true;
  if (room.startsWith('src/controllers/') && roomOf(to).startsWith('src/controllers/') && to !== 'src/controllers/types.ts') return false;
  return (rulesFor(room) ?? []).some((allowed) => to === allowed || to.startsWith(`${allowed}/`) || (allowed.endsWith('.ts') ? false : to.startsWith(allowed)));
}

function sourceImports(): { from: string; to: string }[] {
  const edges: { from: string; to: string }[] = [];
  for (const dir of ['src', 'providers']) {
    for (const file of new Glob('**/*.ts').scanSync(resolve(ROOT, dir))) {
      if (file.endsWith('.test.ts')) continue;
      const from = `${dir}/${file}`;
      const text = readFileSync(resolve(ROOT, from), 'utf8');
      for (const m of text.matchAll(/(?:^|\s)(?:import|export)\b[^'"]*?from\s+'(\.[^']+)'|import\(\s*'(\.[^']+)'\s*\)/gm)) {
        const spec = (m[1] ?? m[2])!;
        edges.push({ from, to: relative(ROOT, resolve(ROOT, dirname(from), spec)) });
      }
    }
  }
  return edges;
}

describe('imports go one way (docs/architecture.md)', () => {
  const edges = sourceImports();

  test('the scan sees the code (a rule over nothing would always hold)', () => {
    expect(edges.length).toBeGreaterThan(500);
    expect(edges).toContainEqual({ from: 'src/main.ts', to: 'src/cmd/cli.ts' });
  });

  test('every source file is in a room with a rule', () => {
    const roomless = [...new Set(edges.map((e) => roomOf(e.from)))].filter((room) => rulesFor(room) === undefined);
    expect(roomless).toEqual([]);
  });

  test('every import is one the rooms allow', () => {
    const bad = edges.filter((e) => !permitted(e.from, e.to)).map((e) => `${e.from} -> ${e.to}`);
    expect(bad).toEqual([]);
  });

  test('no provider imports another provider, and only src/providers.ts links them in', () => {
    const bad = edges.filter((e) => {
      const target = roomOf(e.to);
      if (!target.startsWith('providers/')) return false;
      return roomOf(e.from) !== target && e.from !== 'src/providers.ts';
    });
    expect(bad).toEqual([]);
  });

  test('src/kube imports nothing that is not about Kubernetes (only itself, util and the logger)', () => {
    const bad = edges.filter((e) => e.from.startsWith('src/kube/') && !e.to.startsWith('src/kube/') && !BASE.some((b) => e.to === b || e.to.startsWith(`${b}/`)));
    expect(bad).toEqual([]);
  });

  test('src/net (the BGP speaker, the ARP/NDP responder) knows packets and sessions, nothing of Kubernetes', () => {
    const bad = edges.filter((e) => e.from.startsWith('src/net/') && !e.to.startsWith('src/net/') && !BASE.includes(e.to) && !e.to.startsWith('src/util/'));
    expect(bad).toEqual([]);
  });

  test('no source file imports a test double or the harness', () => {
    expect(edges.filter((e) => e.to.startsWith('test/'))).toEqual([]);
  });

  test('the rule catches what it forbids', () => {
    expect(permitted('src/kube/transport.ts', 'src/controllers/types.ts')).toBe(false);
    expect(permitted('providers/proxmox/provider.ts', 'providers/static/allocator.ts')).toBe(false);
    expect(permitted('src/controllers/route/controller.ts', 'src/controllers/node/index.ts')).toBe(false);
    expect(permitted('src/net/bgp/peer.ts', 'src/kube/transport.ts')).toBe(false);
    expect(permitted('src/net/bfd/endpoint.ts', 'src/kube/transport.ts')).toBe(false);
    expect(permitted('src/lb/compatibility.ts', 'src/controllers/service/kube-vip.ts')).toBe(false);
    // The core never reaches up into a provider or the announcers; the announcers never into the app.
    expect(permitted('src/lb/allocator.ts', 'providers/static/provider.ts')).toBe(false);
    expect(permitted('src/config-file/watch.ts', 'src/lb/ranges.ts')).toBe(false);
    expect(permitted('src/lb/allocator.ts', 'src/announce/addresses.ts')).toBe(false);
    expect(permitted('src/announce/l2/announcer.ts', 'src/app/app.ts')).toBe(false);
    expect(permitted('providers/static/provider.ts', 'src/lb/allocator.ts')).toBe(true);
    expect(permitted('src/controllers/route/controller.ts', 'src/util/resync-trigger.ts')).toBe(true);
  });
});
