import * as v from 'valibot';
import { parseLabelSelector } from '../../src/kube/label-selector.ts';
import { labelValueError } from '../../src/kube/labels.ts';
import { parseIP } from '../../src/net/ip.ts';
import { parseAddressRange } from './address-ranges.ts';
import { KUBERNETES_NAME_MAX_LENGTH, NAMESPACE_MAX_LENGTH } from './config-limits.ts';
import { urlUserinfoError } from './config-secrets.ts';

/**
 * The shape of the static provider's --cloud-config file, checked with valibot: types, every
 * object strict (an unknown key is an error), and each value that can be judged alone (an
 * address, a range, a selector), so one pass reports them all. What needs the whole file
 * (references, duplicates, overlaps, merged settings, secrets) is config-resolve.ts's.
 * Every field is documented in docs/providers/static.md.
 */

const nonEmpty = v.pipe(v.string(), v.nonEmpty('must not be empty'));
/** Names that end up as label values (site, rack) or metric labels (pool). */
const simpleName = v.pipe(
  nonEmpty,
  v.maxLength(63, 'must be at most 63 characters'),
  v.regex(/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, 'must be letters, digits, "-", "_" or "." and start and end with a letter or digit'),
);

/** A string that becomes a node's label value (region, zone, instance type), by Kubernetes' rule. */
export const labelValue = v.pipe(
  v.string(),
  v.check((s) => labelValueError(s) === undefined, (issue) => labelValueError(issue.input as string)!),
);

/** A URL with user:password@ is refused without repeating it (the schema's check; config-secrets.ts says why). */
export function withoutUserinfo() {
  return v.check((s: string) => urlUserinfoError(s) === undefined, (issue) => urlUserinfoError(issue.input as string)!);
}

export const NODE_ADDRESS_TYPES = ['InternalIP', 'ExternalIP', 'Hostname', 'InternalDNS', 'ExternalDNS'] as const;
export const MATCH_CRITERIA = ['providerID', 'nodeName', 'hostname', 'address'] as const;
export type MatchCriterion = (typeof MATCH_CRITERIA)[number];

const RedfishSchema = v.strictObject({
  endpoint: v.optional(v.pipe(v.string(), v.url('must be a URL such as https://10.0.1.11'), withoutUserinfo())),
  systemId: v.optional(nonEmpty),
  auth: v.optional(v.picklist(['basic', 'session'])),
  username: v.optional(nonEmpty),
  password: v.optional(v.string()),
  passwordFile: v.optional(nonEmpty),
  passwordEnv: v.optional(nonEmpty),
  caFile: v.optional(nonEmpty),
  insecureSkipVerify: v.optional(v.boolean()),
  allowInsecureHTTP: v.optional(v.boolean()),
  timeoutSeconds: v.optional(v.pipe(v.number(), v.minValue(0.001, 'must be more than 0'))),
  cacheSeconds: v.optional(v.pipe(v.number(), v.minValue(0, 'must not be negative'))),
});
export type RawRedfish = v.InferOutput<typeof RedfishSchema>;

/** What a machine, its rack, its site and the inventory defaults may each set; the nearest wins. */
const inheritable = {
  region: v.optional(labelValue),
  zone: v.optional(labelValue),
  instanceType: v.optional(labelValue),
  labels: v.optional(v.record(v.string(), v.string())),
  power: v.optional(v.picklist(['on', 'off'])),
  redfish: v.optional(RedfishSchema),
};

const DefaultsSchema = v.strictObject(inheritable);
export type RawDefaults = v.InferOutput<typeof DefaultsSchema>;

const RackSchema = v.strictObject({ ...inheritable, site: v.optional(simpleName) });
export type RawRack = v.InferOutput<typeof RackSchema>;

const AddressSchema = v.pipe(
  v.strictObject({ type: v.picklist(NODE_ADDRESS_TYPES), address: nonEmpty }),
  v.forward(
    v.partialCheck(
      [['type'], ['address']],
      (a) => (a.type !== 'InternalIP' && a.type !== 'ExternalIP') || parseIP(a.address) !== undefined,
      (issue) => `invalid IP address ${JSON.stringify((issue.input as { address: string }).address)}`,
    ),
    ['address'],
  ),
);

/** A CIDR, a range FIRST-LAST or one address. */
const addressRange = v.pipe(
  v.string(),
  v.check((s) => typeof parseAddressRange(s) !== 'string', (issue) => parseAddressRange(issue.input as string) as string),
);

const labelSelector = v.pipe(
  v.string(),
  v.check((s) => selectorError(s) === undefined, (issue) => `invalid label selector: ${selectorError(issue.input as string)}`),
);

function selectorError(s: string): string | undefined {
  try {
    parseLabelSelector(s);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/** A node name, or what becomes one: a Kubernetes object name's length. */
const nodeNameLength = v.maxLength<string, number, string>(KUBERNETES_NAME_MAX_LENGTH, `must be at most ${KUBERNETES_NAME_MAX_LENGTH} characters`);

const machineId = v.pipe(nonEmpty, nodeNameLength, v.regex(/^[^\s/]+$/, 'must not contain spaces or slashes (it becomes providerID static://ID)'));

const MachineSchema = v.strictObject({
  ...inheritable,
  id: machineId,
  nodeName: v.optional(v.pipe(nonEmpty, nodeNameLength)),
  hostname: v.optional(v.pipe(nonEmpty, nodeNameLength)),
  site: v.optional(simpleName),
  rack: v.optional(simpleName),
  addresses: v.optional(v.array(AddressSchema)),
  decommissioned: v.optional(v.boolean()),
});
export type RawMachine = v.InferOutput<typeof MachineSchema>;

const PoolSchema = v.strictObject({
  name: simpleName,
  addresses: v.pipe(v.array(addressRange), v.minLength(1, 'must list at least one CIDR, range or address')),
  exclude: v.optional(v.array(addressRange)),
  namespaces: v.optional(v.array(v.pipe(nonEmpty, v.maxLength(NAMESPACE_MAX_LENGTH, `must be at most ${NAMESPACE_MAX_LENGTH} characters`)))),
  serviceSelector: v.optional(labelSelector),
  priority: v.optional(v.pipe(v.number(), v.integer('must be an integer'))),
  autoAssign: v.optional(v.boolean()),
  allowSpecialAddresses: v.optional(v.boolean()),
  includeNetworkAndBroadcast: v.optional(v.boolean()),
  shareAcrossNamespaces: v.optional(v.boolean()),
});
export type RawPool = v.InferOutput<typeof PoolSchema>;

const MatchBySchema = v.pipe(v.array(v.picklist(MATCH_CRITERIA)), v.minLength(1, 'must list at least one criterion'));
const ClassesSchema = v.array(nonEmpty);

export const StaticConfigSchema = v.strictObject({
  inventory: v.optional(v.strictObject({
    authoritative: v.optional(v.boolean()),
    matchBy: v.optional(MatchBySchema),
    defaults: v.optional(DefaultsSchema),
    sites: v.optional(v.record(simpleName, DefaultsSchema)),
    racks: v.optional(v.record(simpleName, RackSchema)),
    machines: v.optional(v.array(MachineSchema)),
  })),
  loadBalancer: v.optional(v.strictObject({
    classes: v.optional(ClassesSchema),
    pools: v.optional(v.array(PoolSchema)),
  })),
});
export type RawStaticConfig = v.InferOutput<typeof StaticConfigSchema>;

/**
 * What the second pass works on: a valid config, or the valid parts of an invalid one, where
 * a machine or pool with a shape error is a null hole (so later indexes keep their paths).
 */
export interface ResolvableConfig {
  inventory?: Omit<NonNullable<RawStaticConfig['inventory']>, 'machines'> & {
    machines?: (RawMachine | null)[];
    /** The id of every machine whose id is well formed, holes included, so a duplicate id is reported with its machine's other errors. */
    machineIds?: (string | undefined)[];
  };
  loadBalancer?: Omit<NonNullable<RawStaticConfig['loadBalancer']>, 'pools'> & { pools?: (RawPool | null)[] };
}

/**
 * The valid parts of a config that failed the schema, so the second pass can report its own
 * problems in the same run. A machine that depends on an invalid defaults, site or rack entry
 * is left out too: its merged settings would be guesses and its errors echoes.
 */
export function salvageConfig(input: unknown): ResolvableConfig {
  const root = asRecord(input);
  const inv = asRecord(root.inventory);
  const lb = asRecord(root.loadBalancer);
  const brokenSites = new Set<string>();
  const brokenRacks = new Set<string>();
  const entries = <T>(value: unknown, schema: v.GenericSchema<unknown, T>, broken: Set<string>) =>
    Object.fromEntries(Object.entries(asRecord(value)).map(([name, entry]) => {
      const parsed = valid(schema, entry);
      if (!parsed) broken.add(name);
      return [name, parsed ?? ({} as T)];
    }));
  const defaults = valid(DefaultsSchema, inv.defaults ?? {});
  const sites = entries(inv.sites, DefaultsSchema, brokenSites);
  const racks = entries(inv.racks, RackSchema, brokenRacks);
  const machines = Array.isArray(inv.machines)
    ? inv.machines.map((m) => {
        const machine = valid(MachineSchema, m);
        if (!machine || !defaults) return null;
        const site = machine.site ?? (machine.rack !== undefined ? racks[machine.rack]?.site : undefined);
        if ((machine.rack !== undefined && brokenRacks.has(machine.rack)) || (site !== undefined && brokenSites.has(site))) return null;
        return machine;
      })
    : undefined;
  return {
    inventory: {
      authoritative: valid(v.boolean(), inv.authoritative),
      matchBy: valid(MatchBySchema, inv.matchBy),
      defaults: defaults ?? {},
      sites,
      racks,
      machines,
      machineIds: Array.isArray(inv.machines) ? inv.machines.map((m) => valid(machineId, asRecord(m).id)) : undefined,
    },
    loadBalancer: {
      classes: valid(ClassesSchema, lb.classes),
      pools: Array.isArray(lb.pools) ? lb.pools.map((p) => valid(PoolSchema, p) ?? null) : undefined,
    },
  };
}

function valid<T>(schema: v.GenericSchema<unknown, T>, value: unknown): T | undefined {
  const r = v.safeParse(schema, value);
  return r.success ? r.output : undefined;
}

function asRecord(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}
