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
  // The controllers' names and aliases (upstream's names/controller_names.go): read by all, reads nothing.
  ['src/names.ts', []],
  ['src/systemd', BASE],
  ['src/net/bgp', ['src/net', ...BASE]],
  ['src/net/bfd', ['src/net', ...BASE]],
  ['src/net/l2', ['src/net', ...BASE]],
  ['src/net', BASE],
  ['src/kube', BASE],
  // X.509 and PKCS#10 read as Go reads them: the strict DER reader and Go's directory strings, for the CSR approver and the client certificates.
  ['src/x509', BASE],
  // What the providers that read an HTTP API share: pinned-fingerprint TLS trust, request metrics, back-off.
  ['src/http-api', BASE],
  ['src/cloud', ['src/kube', 'src/net', ...BASE]],
  ['src/server', ['src/kube', 'src/x509', ...BASE]],
  ['src/controllers/types.ts', ['src/cloud', 'src/kube', ...BASE]],
  // The status objects the leader publishes: a controller-like room above the controllers, told the lifecycle's breaker through its link.
  ['src/status', ['src/controllers/types.ts', 'src/controllers/nodelifecycle/breaker-link.ts', 'src/names.ts', 'src/cloud', 'src/kube', 'src/net', ...BASE]],
  // A controller knows the cloud contract and Kubernetes, never another controller, a provider, nor src/status.
  ['src/controllers/', ['src/controllers/types.ts', 'src/names.ts', 'src/cloud', 'src/kube', 'src/net', 'src/x509', ...BASE]],
  // The address core every provider reads: the config file, the pools, the sections.
  ['src/config-file', ['src/cloud', 'src/kube', ...BASE]],
  ['src/lb', ['src/config-file', 'src/cloud', 'src/kube', 'src/net', ...BASE]],
  // Announcing addresses (BGP from the leader, ARP/NDP from every node): the pools, packets and Kubernetes.
  ['src/announce', ['src/lb', 'src/config-file', 'src/server', 'src/cloud', 'src/kube', 'src/net', ...BASE]],
  // Node rules: the nodeRules section and its evaluation over a provider's facts.
  ['src/node-rules', ['src/config-file', 'src/cloud', 'src/kube', ...BASE]],
  // Which of a machine's addresses its node gets, for the providers that read them from an API.
  ['src/node-addresses', ['src/config-file', 'src/lb', 'src/net', ...BASE]],
  ['src/config-sections.ts', ['src/node-rules', 'src/announce', 'src/lb', 'src/config-file', 'src/cloud', 'src/kube', 'src/net', ...BASE]],
  // A provider: the core and the contract; never another provider.
  ['src/shared-sections-provider.ts', ['src/announce', 'src/lb', 'src/config-file', 'src/cloud', ...BASE]],
  ['providers/', ['src/shared-sections-provider.ts', 'src/config-sections.ts', 'src/node-rules', 'src/lb', 'src/config-file', 'src/http-api', 'src/node-addresses', 'src/cloud', 'src/kube', 'src/net', ...BASE]],
  ['src/migrate', ['src/lb', 'src/net', ...BASE]],
  // The flags: parsers of the rooms whose values they check, the lifecycle's and the L2 liveness's defaults, and the controllers' names.
  ['src/options', ['src/net', 'src/server', 'src/controllers/nodelifecycle/options.ts', 'src/announce/l2/liveness.ts', 'src/names.ts', ...BASE]],
  ['src/app', ['src/names.ts', 'src/options', 'src/controllers', 'src/status', 'src/announce', 'src/server', 'src/systemd', 'src/cloud', 'src/kube', 'src/net', 'src/version.ts', ...BASE]],
  ['src/providers.ts', ['providers/static/index.ts', 'providers/proxmox/index.ts', 'providers/lxd/index.ts', 'src/cloud']],
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

/** src/server's concerns, as hono files them: auth/ and tls/ each stand alone; the shared types are src/server/types.ts. */
const SERVER_CONCERNS = ['src/server/auth/', 'src/server/tls/'];

function crossesServerConcerns(from: string, to: string): boolean {
  const concern = SERVER_CONCERNS.find((c) => from.startsWith(c));
  return concern !== undefined && to.startsWith('src/server/') && !to.startsWith(concern) && to !== 'src/server/types.ts' && to !== 'src/server/status.ts';
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

/** The circles among rooms (strongly connected sets of more than one room), each sorted; none is the rule. */
function roomCircles(edges: readonly { from: string; to: string }[]): string[][] {
  return circles(edges, roomOf);
}

/** The circles among files, type-only imports included (a type both ways is still two modules that need each other). */
function fileCircles(edges: readonly { from: string; to: string }[]): string[][] {
  return circles(edges, (path) => path);
}

function circles(edges: readonly { from: string; to: string }[], nodeOf: (path: string) => string): string[][] {
  const next = new Map<string, Set<string>>();
  for (const { from, to } of edges) {
    const [a, b] = [nodeOf(from), nodeOf(to)];
    if (a === b) continue;
    if (!next.has(a)) next.set(a, new Set());
    next.get(a)!.add(b);
  }
  const reach = (start: string): Set<string> => {
    const seen = new Set<string>();
    const todo = [start];
    while (todo.length) for (const n of next.get(todo.pop()!) ?? []) if (!seen.has(n)) (seen.add(n), todo.push(n));
    return seen;
  };
  const reachOf = new Map([...next.keys()].map((room) => [room, reach(room)]));
  const circles = new Map<string, string[]>();
  for (const [room, reached] of reachOf) {
    if (!reached.has(room)) continue;
    const circle = [...reached].filter((other) => reachOf.get(other)?.has(room)).sort();
    circles.set(circle.join(' '), circle);
  }
  return [...circles.values()];
}

/**
 * What docs/architecture.md's drawing ("## The arrows") gets wrong about `edges`: a room arrow of
 * the code it does not draw, or an arrow it draws that no import makes. `<name>`/`<each>` stand
 * for every provider or controller folder; util and the logger are not drawn.
 */
function drawingProblems(markdown: string, edges: readonly { from: string; to: string }[]): string[] {
  const block = markdown.slice(markdown.indexOf('## The arrows')).split('```')[1] ?? '';
  const entries: { left: string[]; right: string[] }[] = [];
  for (const line of block.split('\n')) {
    if (!line.trim()) continue;
    if (/^\S/.test(line)) {
      const [left = '', right = ''] = line.split(' -> ');
      entries.push({ left: paths(left), right: paths(right) });
    } else entries.at(-1)?.right.push(...paths(line));
  }
  const code = new Set(edges.map((e) => `${roomOf(e.from)} -> ${roomOf(e.to)}`).filter((a) => !a.endsWith(' -> src/util') && !a.endsWith(' -> src/log.ts') && !/^(.+) -> \1$/.test(a)));
  const rooms = [...new Set(edges.flatMap((e) => [roomOf(e.from), roomOf(e.to)]))];
  const matches = (pattern: string, room: string) =>
    pattern.endsWith('/<name>') || pattern.endsWith('/<each>') ? room.startsWith(pattern.replace(/<\w+>$/, '')) && room !== 'src/controllers/types.ts' : roomOf(pattern.endsWith('.ts') ? pattern : `${pattern}/x.ts`) === room;
  const problems: string[] = [];
  for (const arrow of code) {
    const [from, to] = arrow.split(' -> ') as [string, string];
    if (!entries.some((e) => e.left.some((l) => matches(l, from)) && e.right.some((r) => matches(r, to)))) problems.push(`${arrow} is in the code, not drawn`);
  }
  for (const e of entries) {
    for (const r of e.right) {
      const real = rooms.some((from) => e.left.some((l) => matches(l, from)) && rooms.some((to) => matches(r, to) && code.has(`${from} -> ${to}`)));
      if (!real) problems.push(`${e.left.join(', ')} -> ${r} is drawn, not in the code`);
    }
  }
  return problems;
}

/** The src/ and providers/ paths a line of the drawing names. */
function paths(text: string): string[] {
  return [...text.matchAll(/\b(?:src|providers)\/[\w./<>-]*[\w>]/g)].map((m) => m[0]);
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

  test('no two rooms import each other, directly or round a circle', () => {
    expect(roomCircles(edges)).toEqual([]);
  });

  test('src/server: auth/ and tls/ never import each other (nor app.ts, server.ts), only the shared types and status answers', () => {
    expect(edges.filter((e) => crossesServerConcerns(e.from, e.to)).map((e) => `${e.from} -> ${e.to}`)).toEqual([]);
  });

  test('no two files import each other, directly or round a circle, not even for a type', () => {
    expect(fileCircles(edges)).toEqual([]);
  });

  test('docs/architecture.md draws every arrow the code has, and none it does not', () => {
    expect(drawingProblems(readFileSync(resolve(ROOT, 'docs/architecture.md'), 'utf8'), edges)).toEqual([]);
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
    // The flags read the L2 liveness defaults, nothing else of the announcers.
    expect(permitted('src/options/speaker.ts', 'src/announce/l2/announcer.ts')).toBe(false);
    expect(permitted('src/options/speaker.ts', 'src/announce/l2/liveness.ts')).toBe(true);
    // The flags read the controllers' names from src/names.ts, never the app above them; names read nothing.
    expect(permitted('src/options/controllers.ts', 'src/app/controllers.ts')).toBe(false);
    expect(permitted('src/names.ts', 'src/util/errors.ts')).toBe(false);
    // A controller never reaches up into src/status (the publisher reads the lifecycle's link, not the other way).
    expect(permitted('src/controllers/nodelifecycle/controller.ts', 'src/status/resources.ts')).toBe(false);
    expect(permitted('src/status/publisher.ts', 'src/controllers/nodelifecycle/controller.ts')).toBe(false);
    expect(roomCircles([{ from: 'src/status/publisher.ts', to: 'src/controllers/types.ts' }, { from: 'src/controllers/types.ts', to: 'src/status/resources.ts' }])).toEqual([['src/controllers/types.ts', 'src/status']]);
    expect(crossesServerConcerns('src/server/tls/client-cert-server.ts', 'src/server/auth/client-certificates.ts')).toBe(true);
    expect(crossesServerConcerns('src/server/auth/middleware.ts', 'src/server/app.ts')).toBe(true);
    expect(crossesServerConcerns('src/server/tls/client-cert-server.ts', 'src/server/types.ts')).toBe(false);
    // Shared server types live in src/server/types.ts: a type-only import both ways is a circle too.
    expect(fileCircles([{ from: 'src/server/auth/middleware.ts', to: 'src/server/auth/client-certificates.ts' }, { from: 'src/server/auth/client-certificates.ts', to: 'src/server/auth/middleware.ts' }])).toEqual([['src/server/auth/client-certificates.ts', 'src/server/auth/middleware.ts']]);
    // The drawing: an arrow the code gains, or one the drawing invents, is named.
    const drawing = readFileSync(resolve(ROOT, 'docs/architecture.md'), 'utf8');
    expect(drawingProblems(drawing, [...sourceImports(), { from: 'src/kube/transport.ts', to: 'src/server/types.ts' }])).toEqual(['src/kube -> src/server is in the code, not drawn']);
    expect(drawingProblems(drawing.replace('src/server              -> src/kube', 'src/server              -> src/kube, src/cloud'), sourceImports())).toEqual(['src/server -> src/cloud is drawn, not in the code']);
    // The certificate readers' room reads nothing of the project but util and the logger.
    expect(permitted('src/x509/der.ts', 'src/server/types.ts')).toBe(false);
    expect(permitted('src/x509/der.ts', 'src/kube/transport.ts')).toBe(false);
    expect(permitted('src/controllers/csr/pkcs10.ts', 'src/x509/der.ts')).toBe(true);
    expect(permitted('providers/static/provider.ts', 'src/lb/allocator.ts')).toBe(true);
    expect(permitted('src/controllers/route/controller.ts', 'src/util/resync-trigger.ts')).toBe(true);
  });
});
