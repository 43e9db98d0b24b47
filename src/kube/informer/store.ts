/**
 * The informer's cache: the objects last seen from the API server, keyed as client-go keys them
 * (`namespace/name`, or `name` for cluster-scoped objects), with secondary indexes so a
 * controller can ask "which services use this node" without scanning everything.
 *
 * Every mutation returns what changed, so the reflector can tell handlers exactly that; a relist
 * (replace) returns the whole difference, including objects that vanished while disconnected.
 */

export interface KubeObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
}

export type StoreChange<T> =
  | { type: 'add'; obj: T }
  | { type: 'update'; oldObj: T; obj: T }
  | { type: 'delete'; obj: T };

/** Values an object is filed under in one index (e.g. the node names a service selects). */
export type IndexFunc<T> = (obj: T) => string[];

export function objectKey(obj: KubeObject): string {
  const name = obj.metadata?.name;
  if (!name) throw new Error('object has no metadata.name: it cannot be stored');
  const namespace = obj.metadata?.namespace;
  return namespace ? `${namespace}/${name}` : name;
}

interface Index<T> {
  fn: IndexFunc<T>;
  keysByValue: Map<string, Set<string>>;
}

export class Store<T extends KubeObject> {
  private readonly items = new Map<string, T>();
  private readonly indexes = new Map<string, Index<T>>();

  get(key: string): T | undefined {
    return this.items.get(key);
  }

  // Loops, not [...map.values()]: in Bun 1.4.5 the spread makes an iterator result object per
  // entry (5000 for 5000 nodes, every lifecycle period) and takes twice as long.
  /** A new array each call: the caller may change it (the lifecycle pass filters it in place). */
  list(): T[] {
    const out: T[] = [];
    for (const obj of this.items.values()) out.push(obj);
    return out;
  }

  keys(): string[] {
    const out: string[] = [];
    for (const key of this.items.keys()) out.push(key);
    return out;
  }

  get size(): number {
    return this.items.size;
  }

  /** Adds an index; objects already stored are indexed at once. */
  addIndexer(name: string, fn: IndexFunc<T>): void {
    if (this.indexes.has(name)) throw new Error(`index ${name} already exists`);
    const index: Index<T> = { fn, keysByValue: new Map() };
    this.indexes.set(name, index);
    for (const [key, obj] of this.items) fileUnder(index, key, obj);
  }

  byIndex(name: string, value: string): T[] {
    const index = this.indexes.get(name);
    if (!index) throw new Error(`no index named ${name}`);
    const found: T[] = [];
    for (const key of index.keysByValue.get(value) ?? []) {
      const obj = this.items.get(key);
      if (obj) found.push(obj);
    }
    return found;
  }

  /** Adds or replaces the object under its key. */
  upsert(obj: T): StoreChange<T> {
    const key = objectKey(obj);
    const oldObj = this.items.get(key);
    if (oldObj) this.unindex(key, oldObj);
    this.items.set(key, obj);
    for (const index of this.indexes.values()) fileUnder(index, key, obj);
    return oldObj ? { type: 'update', oldObj, obj } : { type: 'add', obj };
  }

  /**
   * Removes the object with obj's key. The change carries obj (the final state the server sent);
   * nothing changes, and undefined is returned, when the key was not stored.
   */
  delete(obj: T): StoreChange<T> | undefined {
    const key = objectKey(obj);
    const oldObj = this.items.get(key);
    if (!oldObj) return undefined;
    this.unindex(key, oldObj);
    this.items.delete(key);
    return { type: 'delete', obj };
  }

  /**
   * Makes the store hold exactly `objects` (a relist). Returns the difference: adds, updates
   * (for every object still present, changed or not) and deletes carrying the last known state.
   */
  replace(objects: T[]): StoreChange<T>[] {
    const changes: StoreChange<T>[] = [];
    const seen = new Set<string>();
    for (const obj of objects) {
      seen.add(objectKey(obj));
      changes.push(this.upsert(obj));
    }
    for (const [key, oldObj] of this.items) {
      if (seen.has(key)) continue;
      changes.push(this.delete(oldObj)!);
    }
    return changes;
  }

  private unindex(key: string, obj: T): void {
    for (const index of this.indexes.values()) {
      for (const value of index.fn(obj)) {
        const keys = index.keysByValue.get(value);
        if (!keys) continue;
        keys.delete(key);
        if (keys.size === 0) index.keysByValue.delete(value);
      }
    }
  }
}

function fileUnder<T>(index: Index<T>, key: string, obj: T): void {
  for (const value of index.fn(obj)) {
    let keys = index.keysByValue.get(value);
    if (!keys) index.keysByValue.set(value, (keys = new Set()));
    keys.add(key);
  }
}
