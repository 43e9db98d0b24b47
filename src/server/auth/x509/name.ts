/**
 * A certificate's Name read as Go's crypto/x509 reads it (parser.go parseName, parseASN1String;
 * pkix.Name.FillFromRDNSequence): every attribute value must be one of six string types, valid for
 * its type (src/x509/directory-string.ts), else the whole certificate is unreadable (Go refuses to
 * parse it); the common name is the LAST CN attribute, the organizations every O attribute in
 * order, across multi-valued RDNs.
 * Read from the DER, not from the runtime's printed subject, which escapes characters (a newline
 * in a CN prints as `\0A`).
 */
import { DerReader, TAG, readOid } from '../../../x509/der.ts';
import { readDirectoryString } from '../../../x509/directory-string.ts';

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
      const text = readDirectoryString(value, `${what} attribute ${type}`);
      if (type === COMMON_NAME) out.commonName = text;
      else if (type === ORGANIZATION) out.organizations.push(text);
    }
  }
  return out;
}
