import * as v from 'valibot';
import type { ReportIssue } from './config-file/issues.ts';
import { asRecord } from './config-file/schema.ts';
import type { LoadBalancerConfig } from './pools/config-model.ts';
import { resolveLoadBalancer } from './pools/config-resolve.ts';
import { LoadBalancerSchema, salvageLoadBalancer, type ResolvableLoadBalancer } from './pools/config-schema.ts';

/**
 * The top-level sections every provider's config file has, whatever the provider: today
 * `loadBalancer` (address pools). A provider's schema spreads SHARED_SECTIONS into its own,
 * its salvage calls salvageSharedSections and its resolve resolveSharedSections, so a section
 * added here (BGP and L2 announcement are next) reaches every provider with the same keys,
 * checks and paths.
 */

/** The schema entries of the shared sections (each optional), spread into every provider's root schema. */
export const SHARED_SECTIONS = {
  loadBalancer: v.optional(LoadBalancerSchema),
};

/** The shared sections as the second pass sees them: valid, or the valid parts of each. */
export interface ResolvableSharedSections {
  loadBalancer?: ResolvableLoadBalancer;
}

/** The shared sections after validation, part of every provider's config. */
export interface SharedSections {
  loadBalancer: LoadBalancerConfig;
}

/** The valid parts of the shared sections of a file (its root mapping) that failed its schema. */
export function salvageSharedSections(root: unknown): ResolvableSharedSections {
  const r = asRecord(root);
  return { loadBalancer: salvageLoadBalancer(r.loadBalancer) };
}

/** Second pass over the shared sections: their meaning, every problem reported with its path. */
export function resolveSharedSections(raw: ResolvableSharedSections, report: ReportIssue): SharedSections {
  return { loadBalancer: resolveLoadBalancer(raw.loadBalancer, report) };
}
