/**
 * A certificate's Name read as Go's crypto/x509 reads it (parser.go parseName, parseASN1String;
 * pkix.Name.FillFromRDNSequence): every attribute value must be one of six string types, valid for
 * its type, else the whole certificate is unreadable (Go refuses to parse it); the common name is
 * the LAST CN attribute, the organizations every O attribute in order, across multi-valued RDNs.
 * Read from the DER, not from the runtime's printed subject, which escapes characters (a newline
 * in a CN prints as `\0A`).
 */
import { DerError, DerReader, TAG, readOid } from './der-reader.ts';

const COMMON_NAME = '2.5.4.3';
const ORGANIZATION = '2.5.4.10';

export interface NameFields {
  commonName: string;
  organizations: string[];
}

export function readName(raw: Uint8Array, what: string): NameFields {
  const name = new DerReader(raw, what).enter(TAG.sequence, what);
  const out: NameFields = { commonName: '', organizations: [] };
  while (!name.empty) {
    const rdn = name.enter(TAG.set, `${what} RDN`);
    while (!rdn.empty) {
      const atv = rdn.enter(TAG.sequence, `${what} attribute`);
      const type = readOid(atv.read(TAG.oid), `${what} attribute type`);
      const value = atv.read();
      atv.end();
      const text = readString(value.tag, value.content, `${what} attribute ${type}`);
      if (type === COMMON_NAME) out.commonName = text;
      else if (type === ORGANIZATION) out.organizations.push(text);
    }
  }
  return out;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Go's parseASN1String: the value as a string, or a DerError for what Go refuses. */
export function readString(tag: number, value: Uint8Array, what: string): string {
  switch (tag) {
    case TAG.t61String: // read as Latin-1, as Go and BoringSSL do
      return codes(value);
    case TAG.printableString:
      if (!value.every(isPrintable)) throw new DerError(`${what}: invalid PrintableString`);
      return codes(value);
    case TAG.utf8String:
      try {
        return utf8.decode(value);
      } catch {
        throw new DerError(`${what}: invalid UTF-8 string`);
      }
    case TAG.bmpString:
      return readBmpString(value, what);
    case TAG.ia5String:
      if (!value.every((b) => b < 0x80)) throw new DerError(`${what}: invalid IA5String`);
      return codes(value);
    case TAG.numericString:
      if (!value.every((b) => (b >= 0x30 && b <= 0x39) || b === 0x20)) throw new DerError(`${what}: invalid NumericString`);
      return codes(value);
    default:
      throw new DerError(`${what}: unsupported string type (tag 0x${tag.toString(16)})`);
  }
}

/** UCS-2, a trailing NUL terminator dropped; surrogates and non-characters refused (as Go). */
function readBmpString(value: Uint8Array, what: string): string {
  if (value.length % 2 !== 0) throw new DerError(`${what}: invalid BMPString`);
  let end = value.length;
  if (end >= 2 && value[end - 1] === 0 && value[end - 2] === 0) end -= 2;
  const units: number[] = [];
  for (let i = 0; i < end; i += 2) {
    const unit = (value[i]! << 8) | value[i + 1]!;
    if (unit === 0xfffe || unit === 0xffff || (unit >= 0xfdd0 && unit <= 0xfdef) || (unit >= 0xd800 && unit <= 0xdfff)) {
      throw new DerError(`${what}: invalid BMPString`);
    }
    units.push(unit);
  }
  return codes(units);
}

/** Go's isPrintable: PrintableString's characters, plus '*' and '&' as Go tolerates. */
function isPrintable(b: number): boolean {
  return (b >= 0x61 && b <= 0x7a) || (b >= 0x41 && b <= 0x5a) || (b >= 0x30 && b <= 0x39) ||
    (b >= 0x27 && b <= 0x29) || (b >= 0x2b && b <= 0x2f) || b === 0x20 || b === 0x3a || b === 0x3d || b === 0x3f ||
    b === 0x2a || b === 0x26;
}

/** Each number as one UTF-16 code unit (a loop: a spread of a long value could overflow the stack). */
function codes(units: ArrayLike<number>): string {
  let s = '';
  for (let i = 0; i < units.length; i++) s += String.fromCharCode(units[i]!);
  return s;
}
