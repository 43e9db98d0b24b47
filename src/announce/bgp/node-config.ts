import * as v from 'valibot';
import type { ConfigIssue } from '../../config-file/issues.ts';
import { asRecord } from '../../config-file/schema.ts';
import { SecretFiles } from '../../config-file/secrets.ts';
import { yamlConfigLoader } from '../../config-file/yaml-load.ts';
import type { LoadBalancerConfig } from '../../lb/config-model.ts';
import { resolveLoadBalancer } from '../../lb/config-resolve.ts';
import { LoadBalancerSchema, salvageLoadBalancer, type ResolvableLoadBalancer } from '../../lb/config-schema.ts';
import type { BgpConfig } from './config-model.ts';
import { resolveBgp } from './config-resolve.ts';
import { BgpSchema, salvageBgp, type ResolvableBgp } from './config-schema.ts';

/**
 * What `edge-ccm speaker` reads of the controller's file for its own BGP sessions: the
 * `loadBalancer` and `bgp` sections, checked by the controller's schema and second pass (so
 * both judge one file alike). The `bgp` section is resolved only when it asks for
 * announceFrom: nodes (then a peer's passwordFile must be readable by the speaker too). The
 * provider's sections are not read.
 */
export interface NodeBgpConfig {
  loadBalancer: LoadBalancerConfig;
  bgp?: BgpConfig;
}

const NodeFileSchema = v.looseObject({ loadBalancer: v.optional(LoadBalancerSchema), bgp: v.optional(BgpSchema) });

export const loadNodeBgpConfig = yamlConfigLoader<{ loadBalancer?: ResolvableLoadBalancer; bgp?: ResolvableBgp }, NodeBgpConfig>({
  schema: NodeFileSchema,
  salvage: (input) => ({ loadBalancer: salvageLoadBalancer(asRecord(input).loadBalancer), bgp: salvageBgp(asRecord(input).bgp) }),
  resolve: (raw, secrets) => {
    const issues: ConfigIssue[] = [];
    const report = (path: ConfigIssue['path'], message: string) => issues.push({ path, message });
    const files = new SecretFiles(secrets);
    const loadBalancer = resolveLoadBalancer(raw.loadBalancer, report);
    // Only a file asking for per-node sessions concerns the speaker's BGP: in the leader's mode its
    // password files need not be mounted in the DaemonSet, and are not read.
    if (raw.bgp?.loadBalancers?.announceFrom !== 'nodes') return { config: { loadBalancer }, issues, warnings: files.warnings };
    const poolIndex = new Map((raw.loadBalancer?.pools ?? []).flatMap((p, i) => (p ? [[p.name, i] as const] : [])));
    const bgp = resolveBgp(raw.bgp, loadBalancer.pools, poolIndex, report, files);
    return { config: { loadBalancer, ...(bgp ? { bgp } : {}) }, issues, warnings: files.warnings };
  },
});

/** The file asks this node to announce its load-balancer addresses itself. */
export function announcesFromNodes(config: NodeBgpConfig): boolean {
  return config.bgp?.loadBalancers.announceFrom === 'nodes';
}
