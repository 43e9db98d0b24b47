import { COMMON_FACT_KEYS, type NodeFacts } from '../../src/cloud/node-rules.ts';
import type { FactVocabulary } from '../../src/node-rules/index.ts';
import type { Machine } from './config-model.ts';

/**
 * What node rules may select a static machine by: the common facts, its hostname, site and rack,
 * and its inventory labels (merged from defaults, site, rack and machine) as `label:KEY`.
 */
export const STATIC_FACTS: FactVocabulary = { provider: 'static', keys: [...COMMON_FACT_KEYS, 'hostname', 'site', 'rack'], labels: true };

export function machineFacts(m: Machine): NodeFacts {
  return {
    values: {
      name: m.nodeName,
      id: m.id,
      providerID: m.providerID,
      region: m.region,
      zone: m.zone,
      instanceType: m.instanceType,
      hostname: m.hostname,
      site: m.site,
      rack: m.rack,
    },
    labels: m.labels,
  };
}
