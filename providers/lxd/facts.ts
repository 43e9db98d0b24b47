import { COMMON_FACT_KEYS, TAGS_FACT, type NodeFacts } from '../../src/cloud/node-rules.ts';
import type { FactVocabulary } from '../../src/node-rules/index.ts';
import type { Instance } from './instance-list.ts';

/**
 * What node rules may select an LXD instance by: the common facts (name: the instance name;
 * id: its volatile.uuid), its project, the cluster member it runs on (location), its type
 * (container or virtual-machine), and as tags its profiles (`profile:NAME`) and its user.* keys
 * (`user.KEY=VALUE`). All are read from the daemon at run time.
 */
export const LXD_FACTS: FactVocabulary = { provider: 'lxd', keys: [...COMMON_FACT_KEYS, 'project', 'location', 'type', TAGS_FACT], labels: false };

export function instanceFacts(instance: Instance, identity: { providerID: string; instanceType: string; zone: string; region: string }): NodeFacts {
  const user = Object.entries(instance.config).filter(([k]) => k.startsWith('user.')).map(([k, v]) => `${k}=${v}`);
  return {
    values: { name: instance.name, id: instance.uuid, ...identity, project: instance.project, location: instance.location, type: instance.type },
    tags: [...instance.profiles.map((p) => `profile:${p}`), ...user],
  };
}
