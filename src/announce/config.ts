import * as v from 'valibot';
import { asRecord } from '../config-file/schema.ts';
import type { ConfigIssue } from '../config-file/issues.ts';
import { yamlConfigLoader } from '../config-file/yaml-load.ts';
import type { LoadBalancerConfig } from '../lb/config-model.ts';
import { resolveLoadBalancer } from '../lb/config-resolve.ts';
import { LoadBalancerSchema, salvageLoadBalancer, type ResolvableLoadBalancer } from '../lb/config-schema.ts';

/**
 * What the speaker reads of the controller's config file: the `loadBalancer` section alone
 * (pools, with their announce mode, interfaces and node selector), checked by the same schema and
 * second pass as the controller's, so both judge one file alike. The provider's own sections are
 * not read: the speaker needs no inventory and no credentials (their files are never opened).
 */
const SpeakerFileSchema = v.looseObject({ loadBalancer: v.optional(LoadBalancerSchema) });

export const loadSpeakerConfig = yamlConfigLoader<{ loadBalancer?: ResolvableLoadBalancer }, LoadBalancerConfig>({
  schema: SpeakerFileSchema,
  salvage: (input) => ({ loadBalancer: salvageLoadBalancer(asRecord(input).loadBalancer) }),
  resolve: (raw) => {
    const issues: ConfigIssue[] = [];
    const config = resolveLoadBalancer(raw.loadBalancer, (path, message) => issues.push({ path, message }));
    return { config, issues };
  },
});
