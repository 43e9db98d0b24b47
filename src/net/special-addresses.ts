import { parsePrefix, type Prefix } from './ip.ts';

/**
 * Addresses no service can be reached at from the network (RFC 6890 and RFC 4291): handing one
 * out as a load-balancer address is always a configuration mistake, unless an operator says
 * otherwise for the odd case.
 */
export interface SpecialAddressBlock {
  kind: 'unspecified' | 'loopback' | 'link-local' | 'multicast' | 'broadcast';
  prefix: Prefix;
  /** As written, for messages. */
  cidr: string;
}

const block = (kind: SpecialAddressBlock['kind'], cidr: string): SpecialAddressBlock => ({ kind, prefix: parsePrefix(cidr)!, cidr });

/** Sorted by family, then address. */
export const SPECIAL_ADDRESS_BLOCKS: readonly SpecialAddressBlock[] = [
  // "This network" (RFC 1122): a source address only, 0.0.0.0 among them.
  block('unspecified', '0.0.0.0/8'),
  block('loopback', '127.0.0.0/8'),
  block('link-local', '169.254.0.0/16'),
  block('multicast', '224.0.0.0/4'),
  block('broadcast', '255.255.255.255/32'),
  block('unspecified', '::/128'),
  block('loopback', '::1/128'),
  block('link-local', 'fe80::/10'),
  block('multicast', 'ff00::/8'),
];
