/** The informer's public face: import from here, not from the modules behind it. */
export { Informer, stripManagedFields, type InformerHandlers, type InformerOptions } from './informer.ts';
export { Store, objectKey, type IndexFunc, type KubeObject, type StoreChange } from './store.ts';
export { Reflector, type ReflectorOptions } from './reflector.ts';
