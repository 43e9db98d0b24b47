import type { V1Node, V1Service } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import type { ControllerContext } from '../../src/controllers/types.ts';
import { Store, type Informer, type InformerHandlers, type KubeObject } from '../../src/kube/informer/index.ts';
import type { KubeRequest, KubeTransport, WatchEvent } from '../../src/kube/transport.ts';
import { silentLogger } from '../../src/log.ts';
import { RecordingEventRecorder } from './event-recorder.ts';
import { FakeCloud } from './fake-cloud.ts';

/**
 * A controller's context for tests, in one place: what the test gives, and for the rest a
 * recording transport and recorder, a silent logger, a fresh registry, a FakeCloud, empty
 * hand-fed informers and every node managed. Each controller takes only its part of it.
 */
export function controllerContext(given: Partial<ControllerContext> = {}): ControllerContext {
  return {
    transport: new RecordingTransport(),
    recorder: new RecordingEventRecorder(),
    logger: silentLogger,
    registry: new Registry(),
    cloud: new FakeCloud(),
    clusterName: 'test-cluster',
    nodeInformer: new HandFedInformer<V1Node>().asInformer(),
    serviceInformer: new HandFedInformer<V1Service>().asInformer(),
    isManagedNode: () => true,
    ...given,
  };
}

/** Stand-ins for a controller's API surface in unit tests: its transport and its informers. */

/** Records every request and answers {} (or the error `fail` picks): the writes are what we check. */
export class RecordingTransport implements KubeTransport {
  readonly server = 'https://recording.invalid';
  readonly requests: KubeRequest[] = [];
  fail?: (req: KubeRequest) => Error | undefined;

  async request<T>(req: KubeRequest): Promise<T> {
    this.requests.push(req);
    const error = this.fail?.(req);
    if (error) throw error;
    return {} as T;
  }

  // eslint-disable-next-line require-yield
  async *watch<T>(): AsyncGenerator<WatchEvent<T>> {
    throw new Error('controllers never watch through their transport (the informers do)');
  }

  patches(): { path: string; body: unknown }[] {
    return this.requests.filter((r) => r.method === 'PATCH').map((r) => ({ path: r.path, body: r.body }));
  }
}

/** The informer surface the controller uses, with a real Store, driven by the test. */
export class HandFedInformer<T extends KubeObject> {
  readonly store = new Store<T>();
  private readonly handlers: InformerHandlers<T>[] = [];

  addHandlers(handlers: InformerHandlers<T>): () => void {
    this.handlers.push(handlers);
    for (const obj of this.store.list()) handlers.onAdd?.(obj);
    return () => {};
  }
  hasSynced(): boolean {
    return true;
  }
  waitForSync(): Promise<boolean> {
    return Promise.resolve(true);
  }
  set(obj: T): void {
    const change = this.store.upsert(obj);
    for (const h of this.handlers) {
      if (change.type === 'add') h.onAdd?.(obj);
      else if (change.type === 'update') h.onUpdate?.(change.oldObj, obj);
    }
  }
  remove(obj: T): void {
    if (this.store.delete(obj)) for (const h of this.handlers) h.onDelete?.(obj);
  }
  asInformer(): Informer<T> {
    return this as unknown as Informer<T>;
  }
}

