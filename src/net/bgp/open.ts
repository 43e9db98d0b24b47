import { AS_TRANS, BGP_VERSION, CapabilityCode, ErrorCode, OpenError, OPT_PARAM_CAPABILITIES } from './constants.ts';
import { BgpError } from './errors.ts';
import { Reader, Writer } from './wire.ts';

/** An address family and subsequent address family pair (RFC 4760). */
export interface AfiSafi {
  afi: number;
  safi: number;
}

export interface AddPathFamily extends AfiSafi {
  /** The sender of the capability will send several paths per prefix. */
  send: boolean;
  /** The sender of the capability can receive several paths per prefix. */
  receive: boolean;
}

export interface GracefulRestartCapability {
  /** R bit: the sender has restarted (RFC 4724 3). */
  restartState: boolean;
  /** N bit (RFC 8538); read and reported, never set by this speaker. */
  notification: boolean;
  restartTimeSeconds: number;
  /** F bit per family: forwarding state was preserved across the restart. */
  families: (AfiSafi & { forwardingPreserved: boolean })[];
}

export interface Capabilities {
  multiprotocol: AfiSafi[];
  routeRefresh: boolean;
  enhancedRouteRefresh: boolean;
  /** RFC 6793: the sender's real AS, present when it speaks 4-octet AS numbers. */
  fourOctetAs?: number;
  addPath: AddPathFamily[];
  gracefulRestart?: GracefulRestartCapability;
  /** Capabilities this speaker does not know; kept for observability only. */
  unknown: { code: number; value: Uint8Array }[];
}

export interface OpenMessage {
  type: 'open';
  version: number;
  /** The 2-octet "My Autonomous System" field: AS_TRANS when the sender's AS needs 4 octets. */
  myAs: number;
  holdTime: number;
  bgpId: number;
  capabilities: Capabilities;
}

export function emptyCapabilities(): Capabilities {
  return { multiprotocol: [], routeRefresh: false, enhancedRouteRefresh: false, addPath: [], unknown: [] };
}

/** The AS a peer claims in its OPEN: from the 4-octet capability when present, else the 2-octet field. */
export function openAs(open: OpenMessage): number {
  return open.capabilities.fourOctetAs ?? open.myAs;
}

export function twoOctetAs(asn: number): number {
  return asn > 0xffff ? AS_TRANS : asn;
}

const openError = (subcode: number, data?: Uint8Array) => (what: string) => new BgpError(ErrorCode.OPEN_MESSAGE, subcode, `OPEN: ${what}`, data);

export function decodeOpen(body: Uint8Array): OpenMessage {
  const r = new Reader(body, openError(0));
  if (body.length < 10) {
    const length = new Uint8Array(2);
    new DataView(length.buffer).setUint16(0, body.length + 19);
    throw new BgpError(ErrorCode.MESSAGE_HEADER, 2, `OPEN of ${body.length + 19} bytes is shorter than the minimum 29`, length);
  }
  const version = r.u8('version');
  if (version !== BGP_VERSION) {
    throw new BgpError(ErrorCode.OPEN_MESSAGE, OpenError.UNSUPPORTED_VERSION, `OPEN: version ${version} is not supported (only ${BGP_VERSION})`, new Uint8Array([0, BGP_VERSION]));
  }
  const myAs = r.u16('my AS');
  const holdTime = r.u16('hold time');
  if (holdTime === 1 || holdTime === 2) {
    throw new BgpError(ErrorCode.OPEN_MESSAGE, OpenError.UNACCEPTABLE_HOLD_TIME, `OPEN: hold time ${holdTime} s is not allowed (0 or at least 3, RFC 4271 4.2)`);
  }
  const bgpId = r.u32('BGP identifier');
  const paramsLength = r.u8('optional parameters length');
  if (paramsLength !== r.remaining) throw openError(0)(`optional parameters length ${paramsLength} but ${r.remaining} bytes follow`);
  const capabilities = emptyCapabilities();
  while (r.remaining > 0) {
    const type = r.u8('optional parameter type');
    const length = r.u8('optional parameter length');
    const param = r.sub(length, `optional parameter ${type}`);
    if (type !== OPT_PARAM_CAPABILITIES) {
      throw new BgpError(ErrorCode.OPEN_MESSAGE, OpenError.UNSUPPORTED_OPTIONAL_PARAMETER, `OPEN: optional parameter type ${type} is not supported (only capabilities, 2)`);
    }
    readCapabilities(param, capabilities);
  }
  return { type: 'open', version, myAs, holdTime, bgpId, capabilities };
}

function readCapabilities(r: Reader, caps: Capabilities): void {
  while (r.remaining > 0) {
    const code = r.u8('capability code');
    const length = r.u8('capability length');
    const c = r.sub(length, `capability ${code}`);
    const exact = (n: number) => {
      if (length !== n) throw openError(0)(`capability ${code} has length ${length}, expected ${n}`);
    };
    switch (code) {
      case CapabilityCode.MULTIPROTOCOL: {
        exact(4);
        const afi = c.u16('AFI');
        c.u8('reserved');
        caps.multiprotocol.push({ afi, safi: c.u8('SAFI') });
        break;
      }
      case CapabilityCode.ROUTE_REFRESH:
        exact(0);
        caps.routeRefresh = true;
        break;
      case CapabilityCode.ENHANCED_ROUTE_REFRESH:
        exact(0);
        caps.enhancedRouteRefresh = true;
        break;
      case CapabilityCode.FOUR_OCTET_AS:
        exact(4);
        caps.fourOctetAs = c.u32('4-octet AS');
        break;
      case CapabilityCode.ADD_PATH:
        if (length % 4 !== 0) throw openError(0)(`ADD-PATH capability length ${length} is not a multiple of 4`);
        while (c.remaining > 0) {
          const afi = c.u16('AFI');
          const safi = c.u8('SAFI');
          const mode = c.u8('send/receive');
          if (mode < 1 || mode > 3) throw openError(0)(`ADD-PATH send/receive value ${mode} for AFI ${afi} SAFI ${safi} is not 1, 2 or 3`);
          caps.addPath.push({ afi, safi, receive: (mode & 1) !== 0, send: (mode & 2) !== 0 });
        }
        break;
      case CapabilityCode.GRACEFUL_RESTART: {
        if (length < 2 || (length - 2) % 4 !== 0) throw openError(0)(`graceful restart capability length ${length} is not 2 + 4n`);
        const flagsAndTime = c.u16('restart flags and time');
        const families: GracefulRestartCapability['families'] = [];
        while (c.remaining > 0) {
          const afi = c.u16('AFI');
          const safi = c.u8('SAFI');
          families.push({ afi, safi, forwardingPreserved: (c.u8('AFI flags') & 0x80) !== 0 });
        }
        caps.gracefulRestart = {
          restartState: (flagsAndTime & 0x8000) !== 0,
          notification: (flagsAndTime & 0x4000) !== 0,
          restartTimeSeconds: flagsAndTime & 0x0fff,
          families,
        };
        break;
      }
      default:
        caps.unknown.push({ code, value: c.bytes_(length, 'capability value').slice() });
    }
  }
}

export function encodeOpenBody(open: Omit<OpenMessage, 'type' | 'version'>): Uint8Array {
  const w = new Writer();
  w.u8(BGP_VERSION).u16(open.myAs).u16(open.holdTime).u32(open.bgpId);
  const caps = new Writer();
  const c = open.capabilities;
  // One capability per optional parameter is the widest-understood layout (RFC 5492 allows both).
  const param = (code: number, value: Writer | undefined) => {
    const bytes = value?.finish() ?? new Uint8Array(0);
    caps.u8(OPT_PARAM_CAPABILITIES).u8(bytes.length + 2).u8(code).u8(bytes.length).bytes(bytes);
  };
  for (const f of c.multiprotocol) param(CapabilityCode.MULTIPROTOCOL, new Writer().u16(f.afi).u8(0).u8(f.safi));
  if (c.routeRefresh) param(CapabilityCode.ROUTE_REFRESH, undefined);
  if (c.enhancedRouteRefresh) param(CapabilityCode.ENHANCED_ROUTE_REFRESH, undefined);
  if (c.fourOctetAs !== undefined) param(CapabilityCode.FOUR_OCTET_AS, new Writer().u32(c.fourOctetAs));
  if (c.addPath.length > 0) {
    const v = new Writer();
    for (const f of c.addPath) v.u16(f.afi).u8(f.safi).u8((f.receive ? 1 : 0) | (f.send ? 2 : 0));
    param(CapabilityCode.ADD_PATH, v);
  }
  if (c.gracefulRestart) {
    const g = c.gracefulRestart;
    if (g.restartTimeSeconds < 0 || g.restartTimeSeconds > 0x0fff) throw new Error(`graceful restart time ${g.restartTimeSeconds} s is outside 0..4095`);
    const v = new Writer().u16((g.restartState ? 0x8000 : 0) | (g.notification ? 0x4000 : 0) | g.restartTimeSeconds);
    for (const f of g.families) v.u16(f.afi).u8(f.safi).u8(f.forwardingPreserved ? 0x80 : 0);
    param(CapabilityCode.GRACEFUL_RESTART, v);
  }
  for (const u of c.unknown) param(u.code, new Writer().bytes(u.value));
  const params = caps.finish();
  if (params.length > 255) throw new Error(`OPEN optional parameters of ${params.length} bytes exceed 255`);
  w.u8(params.length).bytes(params);
  return w.finish();
}
