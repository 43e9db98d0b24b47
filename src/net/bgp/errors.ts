import { ErrorCode } from './constants.ts';

/**
 * A protocol error found in what a peer sent (or in its behaviour): carries the NOTIFICATION
 * (RFC 4271 4.5) to answer with before the session is reset, and a message naming what was wrong.
 */
export class BgpError extends Error {
  constructor(
    readonly code: number,
    readonly subcode: number,
    message: string,
    readonly data: Uint8Array = new Uint8Array(0),
  ) {
    super(message);
    this.name = 'BgpError';
  }
}

const CODE_NAMES: Record<number, string> = {
  [ErrorCode.MESSAGE_HEADER]: 'message header error',
  [ErrorCode.OPEN_MESSAGE]: 'OPEN message error',
  [ErrorCode.UPDATE_MESSAGE]: 'UPDATE message error',
  [ErrorCode.HOLD_TIMER_EXPIRED]: 'hold timer expired',
  [ErrorCode.FSM]: 'finite state machine error',
  [ErrorCode.CEASE]: 'cease',
  [ErrorCode.ROUTE_REFRESH_MESSAGE]: 'ROUTE-REFRESH message error',
  [ErrorCode.SEND_HOLD_TIMER_EXPIRED]: 'send hold timer expired',
};

/** "UPDATE message error (3/1)": for logs and the observability data. */
export function describeNotification(code: number, subcode: number): string {
  return `${CODE_NAMES[code] ?? 'unknown error'} (${code}/${subcode})`;
}
