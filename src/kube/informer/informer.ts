import { silentLogger, type Logger } from '../../log.ts';
import { Reflector, type ReflectorOptions } from './reflector.ts';
import { Store, type KubeObject, type StoreChange } from './store.ts';
import { errorMessage } from '../../util/errors.ts';

/**
 * A shared informer: one list/watch (the Reflector) feeding one Store, and handlers told of
 * every add, update and delete. Objects are plain JSON typed with client-node's interfaces.
 * Handlers run synchronously, after the store already holds the change; one that throws (or
 * whose promise rejects) is logged and the others still run.
 */

export interface InformerHandlers<T> {
  onAdd?(obj: T): void;
  onUpdate?(oldObj: T, newObj: T): void;
  onDelete?(obj: T): void;
}

/** What to watch: the reflector's selection, plus the informer's own resync. */
export interface InformerOptions<T extends KubeObject>
  extends Pick<ReflectorOptions<T>, 'transport' | 'type' | 'namespace' | 'labelSelector' | 'fieldSelector' | 'transform' | 'logger' | 'pageSize' | 'retryWait'> {
  /** When set, every resyncMs each handler gets onUpdate(obj, obj) for every stored object. */
  resyncMs?: number;
}

/** Drops metadata.managedFields, which nothing here reads and which is often half an object's size. */
export function stripManagedFields<T>(obj: T): T {
  const metadata = (obj as { metadata?: { managedFields?: unknown } }).metadata;
  if (metadata) delete metadata.managedFields;
  return obj;
}

export class Informer<T extends KubeObject> {
  readonly store = new Store<T>();
  private readonly reflector: Reflector<T>;
  private readonly log: Logger;
  private handlers: InformerHandlers<T>[] = [];
  private readonly syncWaiters = new Set<() => void>();
  private running = false;

  constructor(private readonly opts: InformerOptions<T>) {
    this.log = (opts.logger ?? silentLogger).with({ informer: opts.type.plural });
    this.reflector = new Reflector<T>({
      transport: opts.transport,
      type: opts.type,
      namespace: opts.namespace,
      labelSelector: opts.labelSelector,
      fieldSelector: opts.fieldSelector,
      transform: opts.transform ?? stripManagedFields,
      store: this.store,
      onChange: (change) => this.dispatch(change),
      onSynced: () => {
        for (const wake of [...this.syncWaiters]) wake();
      },
      logger: opts.logger,
      pageSize: opts.pageSize,
      retryWait: opts.retryWait,
    });
  }

  /**
   * Registers handlers; objects already stored are delivered to onAdd at once, so a late
   * handler sees the same world as an early one. Returns a function that unregisters them.
   */
  addHandlers(handlers: InformerHandlers<T>): () => void {
    this.handlers = [...this.handlers, handlers];
    if (handlers.onAdd) for (const obj of this.store.list()) this.call('onAdd', () => handlers.onAdd!(obj));
    return () => {
      this.handlers = this.handlers.filter((h) => h !== handlers);
    };
  }

  hasSynced(): boolean {
    return this.reflector.hasSynced();
  }

  /** Resolves true once the first list reached the handlers, false if the signal aborts first. */
  waitForSync(signal: AbortSignal): Promise<boolean> {
    if (this.hasSynced()) return Promise.resolve(true);
    if (signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (synced: boolean) => {
        this.syncWaiters.delete(onSynced);
        signal.removeEventListener('abort', onAbort);
        resolve(synced);
      };
      const onSynced = () => done(true);
      const onAbort = () => done(false);
      this.syncWaiters.add(onSynced);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Lists and watches until the signal aborts; resolves once the watch is closed. */
  async run(signal: AbortSignal): Promise<void> {
    if (this.running) throw new Error(`informer for ${this.opts.type.plural} is already running`);
    this.running = true;
    const resync = this.opts.resyncMs ? setInterval(() => this.resync(), this.opts.resyncMs) : undefined;
    try {
      await this.reflector.run(signal);
    } finally {
      clearInterval(resync);
      this.running = false;
    }
  }

  private dispatch(change: StoreChange<T>): void {
    const handlers = this.handlers; // a handler registered meanwhile already got this object via addHandlers
    switch (change.type) {
      case 'add':
        for (const h of handlers) if (h.onAdd) this.call('onAdd', () => h.onAdd!(change.obj));
        break;
      case 'update':
        // Same resourceVersion, same object: a relist re-delivering what we have is no update.
        if (change.oldObj.metadata?.resourceVersion === change.obj.metadata?.resourceVersion) break;
        for (const h of handlers) if (h.onUpdate) this.call('onUpdate', () => h.onUpdate!(change.oldObj, change.obj));
        break;
      case 'delete':
        for (const h of handlers) if (h.onDelete) this.call('onDelete', () => h.onDelete!(change.obj));
        break;
    }
  }

  private resync(): void {
    if (!this.hasSynced()) return;
    for (const obj of this.store.list()) {
      for (const h of this.handlers) if (h.onUpdate) this.call('onUpdate', () => h.onUpdate!(obj, obj));
    }
  }

  private call(handler: string, fn: () => unknown): void {
    const report = (e: unknown) => this.log.error('informer handler failed', { handler, error: errorMessage(e) });
    try {
      const result = fn();
      if (result instanceof Promise) result.catch(report);
    } catch (e) {
      report(e);
    }
  }
}
