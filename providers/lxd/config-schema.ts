import * as v from 'valibot';
import { asRecord, labelValue, nonEmpty, validOrUndefined, withoutUserinfo } from '../../src/config-file/schema.ts';
import { addressRange } from '../../src/lb/config-schema.ts';
import { SHARED_SECTIONS, salvageSharedSections, type ResolvableSharedSections } from '../../src/config-sections.ts';

/**
 * The shape of the lxd provider's --cloud-config file (valibot, every object strict). What needs
 * more than one value (socket or URL, certificate files, CA or fingerprint) is config-resolve.ts's.
 */

const positive = v.pipe(v.number(), v.minValue(0.001, 'must be more than 0'));
/** SHA-256: 32 bytes in hex, with or without colons (`lxc info` prints it without). */
export const FINGERPRINT = /^([0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2}$|^[0-9A-Fa-f]{64}$/;
/** LXD project names: no slash (they are part of providerIDs lxd://PROJECT/NAME). */
const PROJECT = v.pipe(nonEmpty, v.regex(/^[^/\s]+$/, 'must be a project name (no slash or space)'));

const AddressesSchema = v.strictObject({
  interfaces: v.optional(v.array(nonEmpty)),
  include: v.optional(v.array(addressRange)),
  exclude: v.optional(v.array(addressRange)),
  families: v.optional(v.pipe(v.array(v.picklist(['IPv4', 'IPv6'])), v.minLength(1, 'must list IPv4, IPv6 or both'))),
  hostname: v.optional(v.boolean()),
});

export const LxdConfigSchema = v.strictObject({
  region: v.pipe(nonEmpty, labelValue),
  socket: v.optional(nonEmpty),
  url: v.optional(v.pipe(v.string(), v.url('must be a URL such as https://lxd1.example.com:8443'), withoutUserinfo())),
  clientCertFile: v.optional(nonEmpty),
  clientKeyFile: v.optional(nonEmpty),
  caFile: v.optional(nonEmpty),
  fingerprint: v.optional(v.pipe(v.string(), v.regex(FINGERPRINT, 'must be a SHA-256 fingerprint: 32 hex bytes, as `lxc info` prints it'))),
  projects: v.optional(v.pipe(v.array(PROJECT), v.minLength(1, 'must list at least one project (or set allProjects: true)'))),
  allProjects: v.optional(v.boolean()),
  filter: v.optional(nonEmpty),
  instanceTypeKey: v.optional(v.pipe(v.string(), v.regex(/^user\.[A-Za-z0-9._-]+$/, 'must be a user.* config key, e.g. user.instance-type'))),
  addresses: v.optional(AddressesSchema),
  timeoutSeconds: v.optional(positive),
  cacheSeconds: v.optional(v.pipe(v.number(), v.minValue(0, 'must not be negative'))),
  maxBackoffSeconds: v.optional(v.pipe(v.number(), v.minValue(1, 'must be at least 1'))),
  ...SHARED_SECTIONS,
});
export type RawLxdConfig = v.InferOutput<typeof LxdConfigSchema>;

/** What the second pass works on: a valid config, or the valid parts of one. */
export type ResolvableLxdConfig = Partial<Omit<RawLxdConfig, keyof ResolvableSharedSections>> & ResolvableSharedSections;

export function salvageLxdConfig(input: unknown): ResolvableLxdConfig {
  const root = asRecord(input);
  const out: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(LxdConfigSchema.entries)) {
    if (key in SHARED_SECTIONS) continue;
    out[key] = validOrUndefined(schema as v.GenericSchema, root[key]);
  }
  return { ...(out as ResolvableLxdConfig), ...salvageSharedSections(root) };
}
