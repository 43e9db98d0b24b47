import { DerError, type Tlv } from './der.ts';

/**
 * A subject value as Go's encoding/asn1 reads it into a string (crypto/x509 keeps only values that
 * are strings: the CN and O the API server and the signer see). Each of Go's string types is read
 * to the text Go reads, and any byte sequence Go would read otherwise (or refuse, or skip) is an
 * error: a BOM stays a BOM, a BMPString terminator Go strips is refused, a T61String must be UTF-8
 * (Go keeps its raw bytes as the string).
 */
export function readDirectoryString(value: Tlv, what: string): string {
  const bytes = value.value;
  switch (value.tag) {
    case 0x0c: // UTF8String
    case 0x14: // T61String: Go's string is the raw bytes, the same text only when they are UTF-8
      try {
        return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
      } catch {
        throw new DerError(`${what}: not valid UTF-8`);
      }
    case 0x13: // PrintableString, with the '*' and '&' Go lets through
      return ascii(bytes, /^[A-Za-z0-9 '()+,\-./:=?*&]*$/, what, 'PrintableString');
    case 0x16: // IA5String
      return ascii(bytes, /^[\x00-\x7f]*$/, what, 'IA5String');
    case 0x12: // NumericString
      return ascii(bytes, /^[0-9 ]*$/, what, 'NumericString');
    case 0x1e: // BMPString (UCS-2)
      return bmp(bytes, what);
    default:
      throw new DerError(`${what}: tag 0x${value.tag.toString(16).padStart(2, '0')} is not a string type (UTF8String, PrintableString, IA5String, T61String, NumericString, BMPString)`);
  }
}

function ascii(bytes: Uint8Array, allowed: RegExp, what: string, type: string): string {
  const text = String.fromCharCode(...bytes);
  if (bytes.some((b) => b >= 0x80) || !allowed.test(text)) throw new DerError(`${what}: a character a ${type} cannot hold`);
  return text;
}

/** As encoding/asn1's parseBMPString, except that a trailing NUL terminator (which Go strips) is refused rather than dropped. */
function bmp(bytes: Uint8Array, what: string): string {
  if (bytes.length % 2 !== 0) throw new DerError(`${what}: a BMPString of an odd number of bytes`);
  const units: number[] = [];
  for (let i = 0; i < bytes.length; i += 2) {
    const unit = (bytes[i]! << 8) | bytes[i + 1]!;
    if ((unit >= 0xd800 && unit <= 0xdfff) || unit === 0xfffe || unit === 0xffff || (unit >= 0xfdd0 && unit <= 0xfdef)) {
      throw new DerError(`${what}: a BMPString with a surrogate or noncharacter`);
    }
    units.push(unit);
  }
  if (units.at(-1) === 0) throw new DerError(`${what}: a BMPString ending in a NUL (Go strips it)`);
  return String.fromCharCode(...units);
}
