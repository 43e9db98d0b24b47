import { expect, test } from 'bun:test';
import { Hono } from 'hono';
import { Registry } from 'prom-client';
import type { BgpSource } from '../../cloud/types.ts';
import type { EndpointNodes } from '../../kube/endpoint-slices.ts';
import type { Informer, KubeObject } from '../../kube/informer/index.ts';
import { createLogger } from '../../log.ts';
import type { ServerEnv } from '../../server/types.ts';
import { HealthChecks } from '../../server/health.ts';
import { BgpService, type BgpTermDeps } from './announcer.ts';

/** An informer that has synced already, as the term's shared informers are when a new term starts quickly. */
function syncedInformer<T extends KubeObject>(): Informer<T> {
  return { waitForSync: async () => true, addHandlers: () => () => {}, store: { list: () => [] } } as unknown as Informer<T>;
}

test("a term whose signal is already aborted when it would wait for the route controller's first round ends at once (no wait for the cap)", async () => {
  const lines: string[] = [];
  const source: BgpSource = {
    speakerConfig: () => ({ localAsn: 65001, routerId: '198.51.100.2', peers: [{ address: '198.51.100.1', asn: 65000 }] }) as ReturnType<BgpSource['speakerConfig']>,
    announcements: () => ({ table: [], clashes: [] }),
    routesSynced: false,
    onRoutesChange: () => () => {},
  };
  const deps: BgpTermDeps = {
    source,
    provider: {},
    nodes: syncedInformer(),
    services: syncedInformer(),
    endpoints: { want: () => {}, informer: syncedInformer(), all: () => new Map() } as unknown as EndpointNodes,
    isManagedNode: () => true,
    waitForRoutes: true,
    logger: createLogger({ write: (line) => lines.push(line) }),
    warn: () => {},
  };
  const service = new BgpService(new Registry(), new HealthChecks(), new Hono<ServerEnv>());
  // The lease was lost just as the term started: its signal aborted before the route wait begins.
  const term = new AbortController();
  term.abort(new Error('the leader lease was lost'));
  await service.run(deps, term.signal);
  // Before the fix the wait ran out its 30 s cap, and said so.
  expect(lines.filter((l) => l.includes('did not finish in time'))).toEqual([]);
}, 60_000);
