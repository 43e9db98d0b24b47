import { AttrType } from './constants.ts';

/**
 * RFC 7606 (revised error handling for UPDATE messages): what a malformed part of a received
 * UPDATE costs. Most errors no longer reset the session:
 * - treat-as-withdraw: every route the UPDATE carries (classic NLRI and MP_REACH_NLRI) is taken
 *   as withdrawn, the session stays up (RFC 7606 2);
 * - attribute-discard: the attribute is dropped, the routes are kept;
 * - repeated attribute: all but the first occurrence are dropped (RFC 7606 3.g).
 * What still resets the session is thrown as a BgpError by the decoder: a withdrawn-routes or
 * total-attribute length that overruns the message, NLRI that cannot be parsed (RFC 7606 5.3),
 * MP_REACH_NLRI or MP_UNREACH_NLRI malformed (this speaker has no AFI/SAFI disable, 7.11, 7.12)
 * or repeated (3.g), an unrecognized well-known attribute (RFC 4271 6.3).
 */
export type UpdateFaultAction = 'treat_as_withdraw' | 'attribute_discard' | 'repeated_attribute';

/** The fixed label set of the metric: the three actions above and the resets. */
export const UPDATE_ERROR_KINDS = ['treat_as_withdraw', 'attribute_discard', 'repeated_attribute', 'session_reset'] as const;
export type UpdateErrorKind = (typeof UPDATE_ERROR_KINDS)[number];

export interface UpdateFault {
  action: UpdateFaultAction;
  /** The attribute's type code; absent for faults of the attribute list as a whole. */
  attribute?: number;
  /** What was wrong, for a (rate-limited) log line: never a metric label. */
  what: string;
}

/**
 * The action for a malformed value of each attribute this speaker checks (RFC 7606 7.1-7.15,
 * RFC 6793 6 for AS4_PATH and AS4_AGGREGATOR, RFC 8092 6 for LARGE_COMMUNITY). Wrong attribute
 * flags are treat-as-withdraw for every attribute (RFC 7606 3.c), as is a missing well-known
 * mandatory attribute when the UPDATE carries NLRI (3.d) and an attribute overrunning the path
 * attributes (4). MP_REACH_NLRI and MP_UNREACH_NLRI are not here: malformed, they reset.
 */
export const MALFORMED_ACTION: Record<number, UpdateFaultAction> = {
  [AttrType.ORIGIN]: 'treat_as_withdraw',
  [AttrType.AS_PATH]: 'treat_as_withdraw',
  [AttrType.NEXT_HOP]: 'treat_as_withdraw',
  [AttrType.MULTI_EXIT_DISC]: 'treat_as_withdraw',
  [AttrType.LOCAL_PREF]: 'treat_as_withdraw',
  [AttrType.ATOMIC_AGGREGATE]: 'attribute_discard',
  [AttrType.AGGREGATOR]: 'attribute_discard',
  [AttrType.COMMUNITIES]: 'treat_as_withdraw',
  [AttrType.ORIGINATOR_ID]: 'treat_as_withdraw',
  [AttrType.CLUSTER_LIST]: 'treat_as_withdraw',
  [AttrType.EXTENDED_COMMUNITIES]: 'treat_as_withdraw',
  [AttrType.AS4_PATH]: 'attribute_discard',
  [AttrType.AS4_AGGREGATOR]: 'attribute_discard',
  [AttrType.IPV6_EXTENDED_COMMUNITIES]: 'treat_as_withdraw',
  [AttrType.LARGE_COMMUNITY]: 'treat_as_withdraw',
};
