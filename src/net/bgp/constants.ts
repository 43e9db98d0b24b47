/**
 * Numbers from the BGP RFCs, in one place: message types (RFC 4271 4.1, RFC 2918), NOTIFICATION
 * codes and subcodes (RFC 4271 4.5 and 6, RFC 4486), path attribute types and flags (RFC 4271
 * 4.3 and 5, RFC 1997, RFC 4760, RFC 6793), capability codes (RFC 5492 and the RFCs of each).
 */
export const BGP_PORT = 179;
export const BGP_VERSION = 4;
export const HEADER_LENGTH = 19;
export const MAX_MESSAGE_LENGTH = 4096;
export const MARKER_LENGTH = 16;
/** RFC 6793: the 2-octet stand-in for a 4-octet AS number. */
export const AS_TRANS = 23456;

export const MessageType = { OPEN: 1, UPDATE: 2, NOTIFICATION: 3, KEEPALIVE: 4, ROUTE_REFRESH: 5 } as const;
export type MessageTypeCode = (typeof MessageType)[keyof typeof MessageType];

export const ErrorCode = {
  MESSAGE_HEADER: 1,
  OPEN_MESSAGE: 2,
  UPDATE_MESSAGE: 3,
  HOLD_TIMER_EXPIRED: 4,
  FSM: 5,
  CEASE: 6,
  /** RFC 7313. */
  ROUTE_REFRESH_MESSAGE: 7,
  /** RFC 9687. */
  SEND_HOLD_TIMER_EXPIRED: 8,
} as const;

export const HeaderError = { CONNECTION_NOT_SYNCHRONIZED: 1, BAD_MESSAGE_LENGTH: 2, BAD_MESSAGE_TYPE: 3 } as const;

export const OpenError = {
  UNSUPPORTED_VERSION: 1,
  BAD_PEER_AS: 2,
  BAD_BGP_IDENTIFIER: 3,
  UNSUPPORTED_OPTIONAL_PARAMETER: 4,
  UNACCEPTABLE_HOLD_TIME: 6,
  UNSUPPORTED_CAPABILITY: 7,
} as const;

export const UpdateError = {
  MALFORMED_ATTRIBUTE_LIST: 1,
  UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE: 2,
  MISSING_WELL_KNOWN_ATTRIBUTE: 3,
  ATTRIBUTE_FLAGS_ERROR: 4,
  ATTRIBUTE_LENGTH_ERROR: 5,
  INVALID_ORIGIN: 6,
  INVALID_NEXT_HOP: 8,
  OPTIONAL_ATTRIBUTE_ERROR: 9,
  INVALID_NETWORK_FIELD: 10,
  MALFORMED_AS_PATH: 11,
} as const;

/** RFC 6608 subcodes of the FSM error. */
export const FsmError = { UNSPECIFIED: 0, UNEXPECTED_IN_OPEN_SENT: 1, UNEXPECTED_IN_OPEN_CONFIRM: 2, UNEXPECTED_IN_ESTABLISHED: 3 } as const;

/** RFC 4486 subcodes of Cease. */
export const CeaseSubcode = {
  MAX_PREFIXES: 1,
  ADMINISTRATIVE_SHUTDOWN: 2,
  PEER_DECONFIGURED: 3,
  ADMINISTRATIVE_RESET: 4,
  CONNECTION_REJECTED: 5,
  OTHER_CONFIGURATION_CHANGE: 6,
  CONNECTION_COLLISION_RESOLUTION: 7,
  OUT_OF_RESOURCES: 8,
} as const;


export const AttrFlag = { OPTIONAL: 0x80, TRANSITIVE: 0x40, PARTIAL: 0x20, EXTENDED_LENGTH: 0x10 } as const;

export const AttrType = {
  ORIGIN: 1,
  AS_PATH: 2,
  NEXT_HOP: 3,
  MULTI_EXIT_DISC: 4,
  LOCAL_PREF: 5,
  ATOMIC_AGGREGATE: 6,
  AGGREGATOR: 7,
  COMMUNITIES: 8,
  /** RFC 4456 (route reflection): read only to check them (RFC 7606 7.9, 7.10). */
  ORIGINATOR_ID: 9,
  CLUSTER_LIST: 10,
  MP_REACH_NLRI: 14,
  MP_UNREACH_NLRI: 15,
  /** RFC 4360, RFC 5701, RFC 8092: read only to check their lengths (RFC 7606 7.14, 7.15; RFC 8092 6). */
  EXTENDED_COMMUNITIES: 16,
  AS4_PATH: 17,
  AS4_AGGREGATOR: 18,
  IPV6_EXTENDED_COMMUNITIES: 25,
  LARGE_COMMUNITY: 32,
} as const;

export const Origin = { IGP: 0, EGP: 1, INCOMPLETE: 2 } as const;
export const AsPathSegment = { AS_SET: 1, AS_SEQUENCE: 2, AS_CONFED_SEQUENCE: 3, AS_CONFED_SET: 4 } as const;

export const Afi = { IPV4: 1, IPV6: 2 } as const;
export const Safi = { UNICAST: 1 } as const;

export const CapabilityCode = {
  MULTIPROTOCOL: 1,
  ROUTE_REFRESH: 2,
  GRACEFUL_RESTART: 64,
  FOUR_OCTET_AS: 65,
  ADD_PATH: 69,
  /** RFC 7313; announced by many peers, accepted and ignored here. */
  ENHANCED_ROUTE_REFRESH: 70,
} as const;

/** OPEN optional parameter type of capabilities (RFC 5492). */
export const OPT_PARAM_CAPABILITIES = 2;
