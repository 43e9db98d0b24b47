import { describe, expect, test } from 'bun:test';
import { decodeRequestPem } from './pem.ts';

const BODY = 'MAMCAQA=';
const block = (body = BODY, type = 'CERTIFICATE REQUEST') => `-----BEGIN ${type}-----\n${body}\n-----END ${type}-----\n`;

describe('decodeRequestPem', () => {
  test('reads one block with whitespace around it, in lines, with CRLF', () => {
    const der = [0x30, 0x03, 0x02, 0x01, 0x00];
    expect([...decodeRequestPem(block())]).toEqual(der);
    expect([...decodeRequestPem(`\n \n${block('MAMC\n AQA=')}\n\n`)]).toEqual(der);
    expect([...decodeRequestPem(block().replace(/\n/g, '\r\n'))]).toEqual(der);
  });

  const refused: [string, string, RegExp][] = [
    ['no block', 'nothing', /no "-----BEGIN CERTIFICATE REQUEST-----" line/],
    ['a space before BEGIN', ` ${block()}`, /does not start a line/],
    ['junk before the block', `x\n${block()}`, /text before the BEGIN line/],
    ['a second block', block() + block(), /text after the END line/],
    ['a CERTIFICATE block first', block(BODY, 'CERTIFICATE') + block(), /text before the BEGIN line/],
    ['NEW CERTIFICATE REQUEST', block(BODY, 'NEW CERTIFICATE REQUEST'), /no "-----BEGIN CERTIFICATE REQUEST-----" line/],
    ['text after the BEGIN marker', block().replace('-----\n', '----- x\n'), /BEGIN line must end/],
    ['a header', block(`Proc-Type: 4,ENCRYPTED\n\n${BODY}`), /U\+002D|U\+003A/],
    ['a vertical tab', block('MAMC\vAQA='), /U\+000B/],
    ['an NBSP', block('MAMC\u00a0AQA='), /U\+00A0/],
    ['base64url', block('MAMC_QA='), /U\+005F/],
    ['padding mid-block', block('MA==\nMAMCAQA='), /final padding/],
    ['stray bits after the last byte', block('MAMCAQB='), /not the canonical encoding/],
  ];
  for (const [what, text, message] of refused) {
    test(`refuses ${what}`, () => expect(() => decodeRequestPem(text)).toThrow(message));
  }
});
