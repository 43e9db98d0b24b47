import { describe, expect, test } from 'bun:test';
import { BfdDiag, BfdState, type ControlPacket, decodeControlPacket, encodeControlPacket } from './packet.ts';

const base: ControlPacket = {
  diag: BfdDiag.None,
  state: BfdState.Down,
  poll: false,
  final: false,
  controlPlaneIndependent: false,
  demand: false,
  detectMult: 3,
  myDiscriminator: 0x01020304,
  yourDiscriminator: 0,
  desiredMinTxUs: 1_000_000,
  requiredMinRxUs: 200_000,
  requiredMinEchoRxUs: 0,
};

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('BFD Control packet (RFC 5880 4.1)', () => {
  test('encodes the fields where RFC 5880 puts them', () => {
    const bytes = encodeControlPacket({ ...base, diag: BfdDiag.ControlDetectionTimeExpired, state: BfdState.Up, poll: true, yourDiscriminator: 0xa0b0c0d0, desiredMinTxUs: 200_000 });
    // version 1 | diag 1; Up (3<<6) | P; mult 3; length 24; discriminators; intervals.
    expect(hex(bytes)).toBe('21e00318' + '01020304' + 'a0b0c0d0' + '00030d40' + '00030d40' + '00000000');
    expect(hex(encodeControlPacket({ ...base, state: BfdState.Init, final: true, controlPlaneIndependent: true, demand: true }))).toStartWith('20'+'9a'+'0318');
  });

  test('decodes what it encodes', () => {
    const p = { ...base, state: BfdState.Up, final: true, yourDiscriminator: 7, diag: BfdDiag.AdministrativelyDown };
    expect(decodeControlPacket(encodeControlPacket(p))).toEqual({ packet: p });
  });

  test('refuses a poll and a final in one packet when sending', () => {
    expect(() => encodeControlPacket({ ...base, poll: true, final: true })).toThrow('Poll and Final');
  });

  test('discards what RFC 5880 6.8.6 says to discard, with a reason of a fixed set and what it found', () => {
    const good = encodeControlPacket(base);
    const edit = (f: (b: Uint8Array) => void) => {
      const b = good.slice();
      f(b);
      return decodeControlPacket(b);
    };
    expect(decodeControlPacket(good.subarray(0, 23))).toEqual({ error: 'short', detail: '23 bytes, shorter than a BFD Control packet (24)' });
    expect(edit((b) => (b[0] = 0x40))).toEqual({ error: 'version', detail: 'version 2, not 1' });
    expect(edit((b) => (b[3] = 20))).toEqual({ error: 'length-too-short', detail: 'Length field 20 is too short' });
    expect(edit((b) => (b[3] = 30))).toEqual({ error: 'length-beyond-datagram', detail: 'Length field 30 exceeds the 24 bytes received' });
    expect(edit((b) => (b[1]! |= 0x04))).toEqual({ error: 'length-too-short', detail: 'Length field 24 is too short' });
    expect(decodeControlPacket(Buffer.concat([Buffer.from(good.map((x, i) => (i === 1 ? x | 0x04 : i === 3 ? 28 : x))), Buffer.alloc(4)]))).toEqual({ error: 'authentication', detail: 'authentication requested (the A bit), which is not configured' });
    expect(edit((b) => (b[2] = 0))).toEqual({ error: 'detect-mult-zero', detail: 'Detect Mult is zero' });
    expect(edit((b) => (b[1]! |= 0x01))).toEqual({ error: 'multipoint', detail: 'the Multipoint bit is set' });
    expect(edit((b) => b.fill(0, 4, 8))).toEqual({ error: 'my-discriminator-zero', detail: 'My Discriminator is zero' });
    expect(edit((b) => (b[1] = BfdState.Up << 6))).toEqual({ error: 'your-discriminator-zero', detail: 'Your Discriminator is zero in state Up' });
    expect(edit((b) => (b[1] = BfdState.Init << 6))).toEqual({ error: 'your-discriminator-zero', detail: 'Your Discriminator is zero in state Init' });
    // AdminDown with a zero Your Discriminator is valid; extra bytes beyond Length are ignored.
    expect('packet' in edit((b) => (b[1] = 0))).toBe(true);
    expect('packet' in decodeControlPacket(Buffer.concat([good, Buffer.alloc(8)]))).toBe(true);
  });
});
