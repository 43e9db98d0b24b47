import { ErrorCode, HEADER_LENGTH, HeaderError, MARKER_LENGTH, MAX_MESSAGE_LENGTH, MessageType } from './constants.ts';
import { BgpError } from './errors.ts';
import { decodeOpen, type OpenMessage } from './open.ts';
import { decodeUpdate, type UpdateContext, type UpdateMessage } from './update.ts';

/**
 * The BGP message header (RFC 4271 4.1) and the small messages: KEEPALIVE, NOTIFICATION (4.5),
 * ROUTE-REFRESH (RFC 2918). A received stream is cut into messages by `Framer`; every header
 * field is checked before the body is looked at.
 */
export interface KeepaliveMessage {
  type: 'keepalive';
}

export interface NotificationMessage {
  type: 'notification';
  code: number;
  subcode: number;
  data: Uint8Array;
}

export interface RouteRefreshMessage {
  type: 'route-refresh';
  afi: number;
  /** 0 for a plain request; RFC 7313 uses 1 and 2 to mark the start and end of a refresh. */
  subtype: number;
  safi: number;
}

export type Message = OpenMessage | UpdateMessage | KeepaliveMessage | NotificationMessage | RouteRefreshMessage;

export function frame(type: number, body: Uint8Array = new Uint8Array(0)): Uint8Array {
  const length = HEADER_LENGTH + body.length;
  if (length > MAX_MESSAGE_LENGTH) throw new Error(`message of ${length} bytes exceeds ${MAX_MESSAGE_LENGTH}`);
  const out = new Uint8Array(length);
  out.fill(0xff, 0, MARKER_LENGTH);
  new DataView(out.buffer).setUint16(MARKER_LENGTH, length);
  out[18] = type;
  out.set(body, HEADER_LENGTH);
  return out;
}

export function encodeKeepalive(): Uint8Array {
  return frame(MessageType.KEEPALIVE);
}

export function encodeNotification(code: number, subcode: number, data: Uint8Array = new Uint8Array(0)): Uint8Array {
  // The data is what the peer sent wrong; it is cut to fit one message rather than not sent.
  const body = new Uint8Array(2 + Math.min(data.length, MAX_MESSAGE_LENGTH - HEADER_LENGTH - 2));
  body[0] = code;
  body[1] = subcode;
  body.set(data.subarray(0, body.length - 2), 2);
  return frame(MessageType.NOTIFICATION, body);
}

export function encodeRouteRefresh(afi: number, safi: number): Uint8Array {
  const body = new Uint8Array(4);
  new DataView(body.buffer).setUint16(0, afi);
  body[3] = safi;
  return frame(MessageType.ROUTE_REFRESH, body);
}

const MIN_LENGTH: Record<number, number> = {
  [MessageType.OPEN]: 29,
  [MessageType.UPDATE]: 23,
  [MessageType.NOTIFICATION]: 21,
  [MessageType.KEEPALIVE]: 19,
  [MessageType.ROUTE_REFRESH]: 23,
};

function lengthError(length: number, why: string): BgpError {
  const data = new Uint8Array(2);
  new DataView(data.buffer).setUint16(0, length);
  return new BgpError(ErrorCode.MESSAGE_HEADER, HeaderError.BAD_MESSAGE_LENGTH, `message length ${length}: ${why}`, data);
}

/** A complete message cut from the stream: its type and body, header already checked. */
export interface RawMessage {
  type: number;
  body: Uint8Array;
}

/**
 * Cuts a TCP byte stream into BGP messages. `push` returns every complete message so far and
 * throws the BgpError for the first bad header (after which the session is reset, so the
 * framer is not used again).
 */
export class Framer {
  private pending = new Uint8Array(0);

  push(chunk: Uint8Array): RawMessage[] {
    let buf: Uint8Array;
    if (this.pending.length === 0) buf = chunk;
    else {
      buf = new Uint8Array(this.pending.length + chunk.length);
      buf.set(this.pending);
      buf.set(chunk, this.pending.length);
    }
    const out: RawMessage[] = [];
    let at = 0;
    while (buf.length - at >= HEADER_LENGTH) {
      for (let i = 0; i < MARKER_LENGTH; i++) {
        if (buf[at + i] !== 0xff) throw new BgpError(ErrorCode.MESSAGE_HEADER, HeaderError.CONNECTION_NOT_SYNCHRONIZED, 'message marker is not all ones');
      }
      const length = (buf[at + 16]! << 8) | buf[at + 17]!;
      const type = buf[at + 18]!;
      if (length < HEADER_LENGTH || length > MAX_MESSAGE_LENGTH) throw lengthError(length, `outside ${HEADER_LENGTH}..${MAX_MESSAGE_LENGTH}`);
      const min = MIN_LENGTH[type];
      if (min === undefined) throw new BgpError(ErrorCode.MESSAGE_HEADER, HeaderError.BAD_MESSAGE_TYPE, `message type ${type} is unknown`, new Uint8Array([type]));
      if (length < min || (type === MessageType.KEEPALIVE && length !== HEADER_LENGTH) || (type === MessageType.ROUTE_REFRESH && length !== 23)) {
        throw lengthError(length, `wrong for message type ${type}`);
      }
      if (buf.length - at < length) break;
      // A copy, so the body outlives the socket's receive buffer.
      out.push({ type, body: buf.slice(at + HEADER_LENGTH, at + length) });
      at += length;
    }
    this.pending = buf.slice(at);
    return out;
  }
}

export function decodeMessage(raw: RawMessage, ctx: UpdateContext): Message {
  switch (raw.type) {
    case MessageType.OPEN:
      return decodeOpen(raw.body);
    case MessageType.UPDATE:
      return decodeUpdate(raw.body, ctx);
    case MessageType.KEEPALIVE:
      return { type: 'keepalive' };
    case MessageType.NOTIFICATION:
      return { type: 'notification', code: raw.body[0]!, subcode: raw.body[1]!, data: raw.body.subarray(2) };
    case MessageType.ROUTE_REFRESH: {
      const v = new DataView(raw.body.buffer, raw.body.byteOffset, raw.body.byteLength);
      return { type: 'route-refresh', afi: v.getUint16(0), subtype: raw.body[2]!, safi: raw.body[3]! };
    }
    default:
      throw new BgpError(ErrorCode.MESSAGE_HEADER, HeaderError.BAD_MESSAGE_TYPE, `message type ${raw.type} is unknown`, new Uint8Array([raw.type]));
  }
}
