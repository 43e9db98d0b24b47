import { DerError, TAG, tagName, type Element } from './der.ts';

/**
 * A name's attribute value as Go reads it into a string: crypto/x509's parseASN1String for a
 * certificate, encoding/asn1's string parsers for a request's subject (the same six types, read
 * alike). Each type is read to the text Go reads, and a value Go would read otherwise, refuse or
 * skip is a DerError. Refused although Go accepts it (rare, on purpose):
 * - a T61String with a byte above 0x7f: Go 1.26 reads it as Latin-1, older Go releases (an older API
 *   server's) kept the raw bytes as the string, so only ASCII has one reading;
 * - a BMPString ending in a NUL, which Go strips: "a" and "a\0" would be one name.
 * A byte-order mark stays a byte-order mark, as Go keeps it.
 */
export function readDirectoryString(value: Element, what: string): string {
  const bytes = value.content;
  switch (value.tag) {
    case TAG.utf8String:
      try {
        return utf8.decode(bytes);
      } catch {
        throw new DerError(`${what}: a UTF8String that is not valid UTF-8`);
      }
    case TAG.t61String:
      return ascii(bytes, () => true, what, 'T61String (only ASCII: Go versions read its other bytes differently)');
    case TAG.printableString:
      return ascii(bytes, isPrintable, what, 'PrintableString');
    case TAG.ia5String:
      return ascii(bytes, () => true, what, 'IA5String');
    case TAG.numericString:
      return ascii(bytes, (b) => (b >= 0x30 && b <= 0x39) || b === 0x20, what, 'NumericString');
    case TAG.bmpString:
      return bmp(bytes, what);
    default:
      throw new DerError(`${what}: ${tagName(value.tag)} is not a string type Go reads (UTF8String, PrintableString, IA5String, T61String, NumericString, BMPString)`);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function ascii(bytes: Uint8Array, allowed: (b: number) => boolean, what: string, type: string): string {
  const bad = bytes.findIndex((b) => b >= 0x80 || !allowed(b));
  if (bad >= 0) throw new DerError(`${what}: byte 0x${bytes[bad]!.toString(16).padStart(2, '0')} at ${bad}, a character a ${type} cannot hold`);
  return codes(bytes);
}

/** Go's isPrintable: PrintableString's characters, plus the '*' and '&' Go lets through. */
function isPrintable(b: number): boolean {
  return (b >= 0x61 && b <= 0x7a) || (b >= 0x41 && b <= 0x5a) || (b >= 0x30 && b <= 0x39) ||
    (b >= 0x27 && b <= 0x29) || (b >= 0x2b && b <= 0x2f) || b === 0x20 || b === 0x3a || b === 0x3d || b === 0x3f ||
    b === 0x2a || b === 0x26;
}

/** As Go's parseBMPString (UCS-2; surrogates and noncharacters refused), except that the trailing NUL Go strips is refused. */
function bmp(bytes: Uint8Array, what: string): string {
  if (bytes.length % 2 !== 0) throw new DerError(`${what}: a BMPString of an odd number of bytes`);
  const units: number[] = [];
  for (let i = 0; i < bytes.length; i += 2) {
    const unit = (bytes[i]! << 8) | bytes[i + 1]!;
    if ((unit >= 0xd800 && unit <= 0xdfff) || unit === 0xfffe || unit === 0xffff || (unit >= 0xfdd0 && unit <= 0xfdef)) {
      throw new DerError(`${what}: a BMPString with a surrogate or noncharacter (U+${unit.toString(16).toUpperCase()})`);
    }
    units.push(unit);
  }
  if (units.length > 0 && units.at(-1) === 0) throw new DerError(`${what}: a BMPString ending in a NUL (Go strips it, so the name would have two readings)`);
  return codes(units);
}

/** Each number as one UTF-16 code unit (a loop: a spread of a long value could overflow the stack). */
function codes(units: ArrayLike<number>): string {
  let s = '';
  for (let i = 0; i < units.length; i++) s += String.fromCharCode(units[i]!);
  return s;
}
