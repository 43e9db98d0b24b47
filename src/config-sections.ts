import * as v from 'valibot';
import { BgpSchema, salvageBgp, type ResolvableBgp } from './announce/bgp/config-schema.ts';
import type { BgpConfig } from './announce/bgp/config-model.ts';
import { resolveBgp } from './announce/bgp/config-resolve.ts';
import type { ReportIssue } from './config-file/issues.ts';
import { asRecord } from './config-file/schema.ts';
import type { SecretFiles } from './config-file/secrets.ts';
import type { LoadBalancerConfig } from './lb/config-model.ts';
import { resolveLoadBalancer } from './lb/config-resolve.ts';
import { LoadBalancerSchema, salvageLoadBalancer, type ResolvableLoadBalancer } from './lb/config-schema.ts';
import type { ControlPlaneEndpointConfig } from './announce/vip/config-model.ts';
import { resolveControlPlaneEndpoint } from './announce/vip/config-resolve.ts';
import { ControlPlaneEndpointSchema, salvageControlPlaneEndpoint, type ResolvableControlPlaneEndpoint } from './announce/vip/config-schema.ts';
import { NodeRulesSchema, resolveNodeRules, salvageNodeRules, type FactVocabulary, type NodeRule, type RawNodeRule } from './node-rules/index.ts';

/**
 * The top-level sections every provider's config file has, whatever the provider: today
 * `loadBalancer` (address pools), `bgp` (the BGP speaker's peers and what it announces),
 * `controlPlaneEndpoint` (the API server's VIP, held by `edge-ccm vip`) and `nodeRules` (labels, annotations and taints by rule over the provider's facts). A provider's schema spreads SHARED_SECTIONS into its own,
 * its salvage calls salvageSharedSections and its resolve resolveSharedSections, so a section
 * added here (BGP and L2 announcement are next) reaches every provider with the same keys,
 * checks and paths.
 */

/** The schema entries of the shared sections (each optional), spread into every provider's root schema. */
export const SHARED_SECTIONS = {
  loadBalancer: v.optional(LoadBalancerSchema),
  bgp: v.optional(BgpSchema),
  nodeRules: v.optional(NodeRulesSchema),
  controlPlaneEndpoint: v.optional(ControlPlaneEndpointSchema),
};

/** The shared sections as the second pass sees them: valid, or the valid parts of each. */
export interface ResolvableSharedSections {
  loadBalancer?: ResolvableLoadBalancer;
  bgp?: ResolvableBgp;
  nodeRules?: (RawNodeRule | null)[];
  controlPlaneEndpoint?: ResolvableControlPlaneEndpoint;
}

/** The shared sections after validation, part of every provider's config. */
export interface SharedSections {
  loadBalancer: LoadBalancerConfig;
  /** Absent: no BGP speaker. */
  bgp?: BgpConfig;
  /** In the file's order (later rules override earlier ones); empty: none. */
  nodeRules: NodeRule[];
  /** Absent: no control-plane VIP (read by `edge-ccm vip`; the controller only validates it). */
  controlPlaneEndpoint?: ControlPlaneEndpointConfig;
}

/** The valid parts of the shared sections of a file (its root mapping) that failed its schema. */
export function salvageSharedSections(root: unknown): ResolvableSharedSections {
  const r = asRecord(root);
  return { loadBalancer: salvageLoadBalancer(r.loadBalancer), bgp: salvageBgp(r.bgp), nodeRules: salvageNodeRules(r.nodeRules), controlPlaneEndpoint: salvageControlPlaneEndpoint(r.controlPlaneEndpoint) };
}

/**
 * Second pass over the shared sections: their meaning, every problem reported with its path;
 * `files` reads the secret files they name; `facts` are what the provider knows of a machine
 * (the names node rules may select on).
 */
export function resolveSharedSections(raw: ResolvableSharedSections, report: ReportIssue, files: SecretFiles, facts: FactVocabulary): SharedSections {
  const loadBalancer = resolveLoadBalancer(raw.loadBalancer, report);
  const poolIndex = new Map((raw.loadBalancer?.pools ?? []).flatMap((p, i) => (p ? [[p.name, i] as const] : [])));
  const bgp = resolveBgp(raw.bgp, loadBalancer.pools, poolIndex, report, files);
  const nodeRules = resolveNodeRules(raw.nodeRules, facts, report);
  // Validated only: the VIP's BGP password file is on the control-plane hosts, not read here.
  const controlPlaneEndpoint = resolveControlPlaneEndpoint(raw.controlPlaneEndpoint, report);
  return { loadBalancer, ...(bgp ? { bgp } : {}), nodeRules, ...(controlPlaneEndpoint ? { controlPlaneEndpoint } : {}) };
}
