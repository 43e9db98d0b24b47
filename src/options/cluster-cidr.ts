/**
 * --cluster-cidr as the upstream route controller reads it: a comma-separated list of at most two
 * CIDRs, and two only when one is IPv4 and the other IPv6. Host bits are accepted and masked off
 * (Go's ParseCIDR), so "10.244.1.7/16" means 10.244.0.0/16.
 */
import * as v from 'valibot';
import { formatPrefix, parsePrefix } from '../net/ip.ts';

export interface ClusterCIDRs {
  ipv4?: string;
  ipv6?: string;
}

export type ClusterCIDRsResult = { ok: true; cidrs: ClusterCIDRs } | { ok: false; errors: string[] };

export function parseClusterCIDRs(text: string): ClusterCIDRsResult {
  const entries = text.trim().split(',').map((entry) => entry.trim());
  if (entries.length > 2) {
    return { ok: false, errors: [`at most two CIDRs (one IPv4, one IPv6) are allowed, got ${entries.length}`] };
  }
  const errors: string[] = [];
  const cidrs: ClusterCIDRs = {};
  for (const entry of entries) {
    const prefix = parsePrefix(entry, true);
    if (!prefix) {
      errors.push(`invalid CIDR ${JSON.stringify(entry)}`);
      continue;
    }
    const family = prefix.family === 4 ? 'ipv4' : 'ipv6';
    if (cidrs[family]) {
      errors.push(`two ${family === 'ipv4' ? 'IPv4' : 'IPv6'} CIDRs given; dual-stack needs one IPv4 and one IPv6 CIDR`);
      continue;
    }
    cidrs[family] = formatPrefix(prefix);
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, cidrs };
}

/** The flag schema of such a list (--cluster-cidr, --service-cluster-ip-range): empty, or checked as above. */
export const cidrListSchema = v.pipe(
  v.string(),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed || dataset.value.trim() === '') return;
    const parsed = parseClusterCIDRs(dataset.value);
    if (!parsed.ok) for (const message of parsed.errors) addIssue({ message });
  }),
);
