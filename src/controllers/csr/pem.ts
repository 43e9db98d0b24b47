/**
 * The one PEM "CERTIFICATE REQUEST" block a text may hold, RFC 7468's strict form: the text is
 * that block and whitespace, the block has no headers, its body is standard base64 (padding only
 * at its end) in lines. Go's pem.Decode, which the API server and the signer use, skips leading
 * junk, takes the first block whose BEGIN starts a line, accepts headers, and its base64 decoder
 * skips some characters; a text within the strict form is one Go reads as the same single block
 * with the same bytes, and any other text is refused here rather than read one way of several.
 */

export class PemError extends Error {}

const TYPE = 'CERTIFICATE REQUEST';
const BEGIN = `-----BEGIN ${TYPE}-----`;
const END = `-----END ${TYPE}-----`;
/** Whitespace pem.Decode trims at line ends and its decoder skips: space, tab, CR, LF. Nothing else (no VT, NBSP, U+2028). */
const SPACE = /^[ \t\r\n]*$/;
const BODY = /^[A-Za-z0-9+/= \t\r\n]*$/;

/** The DER bytes of the text's one CERTIFICATE REQUEST block. */
export function decodeRequestPem(text: string): Uint8Array {
  const begin = text.indexOf(BEGIN);
  if (begin < 0) throw new PemError(`no "${BEGIN}" line`);
  const before = text.slice(0, begin);
  if (!SPACE.test(before)) throw new PemError(`text before the BEGIN line (${describe(before)}): only whitespace may surround the block`);
  // pem.Decode finds a BEGIN only at the start of the text or of a line.
  if (begin > 0 && text[begin - 1] !== '\n') throw new PemError('the BEGIN line does not start a line');
  const afterBegin = begin + BEGIN.length;
  const lineEnd = text.indexOf('\n', afterBegin);
  if (lineEnd < 0 || !/^[ \t\r]*$/.test(text.slice(afterBegin, lineEnd))) throw new PemError('the BEGIN line must end after its dashes');
  const end = text.indexOf(END, lineEnd);
  if (end < 0) throw new PemError(`no "${END}" line`);
  if (text[end - 1] !== '\n') throw new PemError('the END line does not start a line');
  const body = text.slice(lineEnd + 1, end);
  const after = text.slice(end + END.length);
  if (!SPACE.test(after)) throw new PemError(`text after the END line (${describe(after)}): only whitespace may surround the block`);
  if (!BODY.test(body)) {
    const bad = [...body].find((c) => !BODY.test(c))!;
    throw new PemError(`character U+${bad.codePointAt(0)!.toString(16).padStart(4, '0').toUpperCase()} in the base64 body: only the standard alphabet, "=" at its end, and space, tab, CR, LF are allowed (no headers, no base64url)`);
  }
  return decodeStrictBase64(body.replace(/[ \t\r\n]/g, ''));
}

/** Standard base64, "=" only as its final padding, and the one encoding of its bytes (no stray bits in the last character). */
function decodeStrictBase64(b64: string): Uint8Array {
  if (b64.length % 4 !== 0 || !/^[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(b64)) {
    throw new PemError('the base64 body is not whole groups of four with "=" only as final padding');
  }
  const bytes = Buffer.from(b64, 'base64');
  if (bytes.toString('base64') !== b64) throw new PemError('the base64 body has bits set beyond its last byte (not the canonical encoding)');
  return new Uint8Array(bytes);
}

function describe(text: string): string {
  return text.length > 40 ? `${JSON.stringify(text.slice(0, 40))}...` : JSON.stringify(text);
}
