import * as v from 'valibot';
import { labelValueError } from '../kube/labels.ts';
import { urlUserinfoError } from './secrets.ts';

/**
 * The valibot pieces every provider's file schema is built from, and the two helpers that
 * salvage the valid parts of a file that failed its schema (so the second pass still runs).
 */

export const nonEmpty = v.pipe(v.string(), v.nonEmpty('must not be empty'));

/** Names that end up as label values (site, rack) or metric labels (pool). */
export const simpleName = v.pipe(
  nonEmpty,
  v.maxLength(63, 'must be at most 63 characters'),
  v.regex(/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, 'must be letters, digits, "-", "_" or "." and start and end with a letter or digit'),
);

/** A string that becomes a node's label value (region, zone, instance type), by Kubernetes' rule. */
export const labelValue = v.pipe(
  v.string(),
  v.check((s) => labelValueError(s) === undefined, (issue) => labelValueError(issue.input as string)!),
);

/** A URL with user:password@ is refused without repeating it (the schema's check; secrets.ts says why). */
export function withoutUserinfo() {
  return v.check((s: string) => urlUserinfoError(s) === undefined, (issue) => urlUserinfoError(issue.input as string)!);
}

/** `value` if it passes `schema`, else undefined: a salvaged part of a file that failed its schema. */
export function validOrUndefined<T>(schema: v.GenericSchema<unknown, T>, value: unknown): T | undefined {
  const r = v.safeParse(schema, value);
  return r.success ? r.output : undefined;
}

/** A mapping of the document, or an empty one for anything else (salvage reads keys without trusting the shape). */
export function asRecord(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}
