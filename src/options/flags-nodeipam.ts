/**
 * The node IPAM controller's flags, as upstream's cmd/cloud-controller-manager adds them (its
 * "nodeipam controller" section, kube-controller-manager's NodeIPAMControllerOptions): not part
 * of k8s.io/cloud-provider, hence not in upstream-flags.ts. A mask size of 0 means the default
 * (24 for IPv4, 64 for IPv6), as upstream; which sizes may be combined is checked with
 * --cluster-cidr (src/controllers/nodeipam/options.ts).
 */
import * as v from 'valibot';
import { cidrListSchema } from './cluster-cidr.ts';
import { flag } from './flag-def.ts';

const maskSize = v.pipe(
  v.number(),
  v.check((n: number) => n >= 0 && n <= 128, (issue) => `must be between 0 (the default) and 128, got ${issue.input}`),
);

export const NODE_IPAM_FLAGS = [
  flag({
    name: 'node-cidr-mask-size',
    key: 'nodeCIDRMaskSize',
    kind: 'int',
    default: 0,
    group: 'nodeipam controller',
    typeName: 'int32',
    help: 'Mask size for node cidr in cluster. Default is 24 for IPv4 and 64 for IPv6.',
    schema: maskSize,
  }),
  flag({
    name: 'node-cidr-mask-size-ipv4',
    key: 'nodeCIDRMaskSizeIPv4',
    kind: 'int',
    default: 0,
    group: 'nodeipam controller',
    typeName: 'int32',
    help: 'Mask size for IPv4 node cidr in dual-stack cluster. Default is 24.',
    schema: maskSize,
  }),
  flag({
    name: 'node-cidr-mask-size-ipv6',
    key: 'nodeCIDRMaskSizeIPv6',
    kind: 'int',
    default: 0,
    group: 'nodeipam controller',
    typeName: 'int32',
    help: 'Mask size for IPv6 node cidr in dual-stack cluster. Default is 64.',
    schema: maskSize,
  }),
  flag({
    name: 'service-cluster-ip-range',
    key: 'serviceClusterIPRange',
    kind: 'string',
    default: '',
    group: 'nodeipam controller',
    help:
      'CIDR Range for Services in cluster: at most one IPv4 and one IPv6 CIDR, comma separated. Requires ' +
      '--allocate-node-cidrs to be true. The part inside --cluster-cidr is never given to a node.',
    schema: cidrListSchema,
  }),
] as const;
