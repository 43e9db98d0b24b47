/**
 * Turning one flag's text into its typed value, with pflag's grammar per kind: Go's ParseBool
 * spellings, decimal int32, floats, Go durations, string lists read as one CSV record, and
 * repeated values taken whole.
 */
import { INT32_MAX, INT32_MIN, parseGoBool } from '../util/strconv.ts';
import { parseGoDuration } from '../util/duration.ts';

export type FlagKind = 'string' | 'bool' | 'int' | 'float' | 'duration' | 'list' | 'repeated';

export interface FlagKindValue {
  string: string;
  bool: boolean;
  int: number;
  float: number;
  /** Milliseconds. */
  duration: number;
  list: string[];
  /** One entry per use, commas kept (pflag's StringArray, NamedCertKeyArray). */
  repeated: string[];
}

export type ParsedValue<T> = { ok: true; value: T } | { ok: false; message: string };


export function parseFlagValue<K extends FlagKind>(kind: K, text: string): ParsedValue<FlagKindValue[K]>;
export function parseFlagValue(kind: FlagKind, text: string): ParsedValue<FlagKindValue[FlagKind]> {
  switch (kind) {
    case 'string':
      return { ok: true, value: text };
    case 'bool': {
      const value = parseGoBool(text);
      return value === undefined ? { ok: false, message: `invalid boolean ${JSON.stringify(text)} (use true or false)` } : { ok: true, value };
    }
    case 'int': {
      if (!/^[+-]?\d+$/.test(text)) return { ok: false, message: `invalid integer ${JSON.stringify(text)}` };
      const value = Number(text);
      if (value < INT32_MIN || value > INT32_MAX) return { ok: false, message: `integer ${text} out of range` };
      return { ok: true, value };
    }
    case 'float': {
      const value = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text) ? Number(text) : NaN;
      if (!Number.isFinite(value)) return { ok: false, message: `invalid number ${JSON.stringify(text)}` };
      return { ok: true, value };
    }
    case 'duration':
      try {
        return { ok: true, value: parseGoDuration(text) };
      } catch (error) {
        return { ok: false, message: (error as Error).message };
      }
    case 'list':
      return parseCSVRecord(text);
    case 'repeated':
      return { ok: true, value: [text] };
  }
}

/** pflag's StringSlice reads its value with encoding/csv: commas separate, quotes protect commas. */
function parseCSVRecord(text: string): ParsedValue<string[]> {
  if (text === '') return { ok: true, value: [] };
  const fields: string[] = [];
  let i = 0;
  for (;;) {
    let field = '';
    if (text[i] === '"') {
      i++;
      for (;;) {
        if (i >= text.length) return { ok: false, message: `unterminated quoted field in ${JSON.stringify(text)}` };
        if (text[i] === '"') {
          if (text[i + 1] === '"') {
            field += '"';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        field += text[i++];
      }
      if (i < text.length && text[i] !== ',') {
        return { ok: false, message: `extraneous or missing " in quoted field in ${JSON.stringify(text)}` };
      }
    } else {
      const end = text.indexOf(',', i);
      field = text.slice(i, end < 0 ? text.length : end);
      if (field.includes('"')) return { ok: false, message: `bare " in non-quoted field in ${JSON.stringify(text)}` };
      i += field.length;
    }
    fields.push(field);
    if (i >= text.length) return { ok: true, value: fields };
    i++; // the comma
  }
}
