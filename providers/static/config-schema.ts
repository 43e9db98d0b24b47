import * as v from 'valibot';
import { parseIP, parsePrefix } from '../../src/net/ip.ts';
import { KUBERNETES_NAME_MAX_LENGTH } from '../../src/config-file/limits.ts';
import { asRecord, labelValue, nonEmpty, simpleName, validOrUndefined, withoutUserinfo } from '../../src/config-file/schema.ts';
import { SHARED_SECTIONS, salvageSharedSections, type ResolvableSharedSections } from '../../src/config-sections.ts';

/**
 * The shape of the static provider's --cloud-config file, checked with valibot: types, every
 * object strict (an unknown key is an error), and each value that can be judged alone (an
 * address, a selector), so one pass reports them all. What needs the whole file (references,
 * duplicates, merged settings, secrets) is config-resolve.ts's. The sections every provider
 * has (loadBalancer) are src/config-sections.ts's. Every field is documented in
 * docs/providers/static.md.
 */

export const NODE_ADDRESS_TYPES = ['InternalIP', 'ExternalIP', 'Hostname', 'InternalDNS', 'ExternalDNS'] as const;
export const STATIC_MATCH_CRITERIA = ['providerID', 'nodeName', 'hostname', 'address'] as const;
export type StaticMatchCriterion = (typeof STATIC_MATCH_CRITERIA)[number];

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

/** A node name, or what becomes one: a Kubernetes object name's length. */
const nodeNameLength = v.maxLength<string, number, string>(KUBERNETES_NAME_MAX_LENGTH, `must be at most ${KUBERNETES_NAME_MAX_LENGTH} characters`);

const machineId = v.pipe(nonEmpty, nodeNameLength, v.regex(/^[^\s/]+$/, 'must not contain spaces or slashes (it becomes providerID static://ID)'));

/** A pod CIDR the machine's Node gets (node IPAM's CloudAllocator): a network address and its length. */
const podCIDR = v.pipe(
  v.string(),
  v.check((s: string) => parsePrefix(s) !== undefined, (issue) => `invalid CIDR ${JSON.stringify(issue.input)} (a network address and its length, host bits zero, such as 10.244.3.0/24)`),
);

const MachineSchema = v.strictObject({
  ...inheritable,
  id: machineId,
  nodeName: v.optional(v.pipe(nonEmpty, nodeNameLength)),
  hostname: v.optional(v.pipe(nonEmpty, nodeNameLength)),
  site: v.optional(simpleName),
  rack: v.optional(simpleName),
  addresses: v.optional(v.array(AddressSchema)),
  podCIDRs: v.optional(v.pipe(v.array(podCIDR), v.minLength(1, 'must list at least one CIDR (or leave podCIDRs out)'), v.maxLength(2, 'at most two CIDRs: one IPv4, one IPv6'))),
  decommissioned: v.optional(v.boolean()),
});
export type RawMachine = v.InferOutput<typeof MachineSchema>;

const MatchBySchema = v.pipe(v.array(v.picklist(STATIC_MATCH_CRITERIA)), v.minLength(1, 'must list at least one criterion'));

export const StaticConfigSchema = v.strictObject({
  inventory: v.optional(v.strictObject({
    authoritative: v.optional(v.boolean()),
    matchBy: v.optional(MatchBySchema),
    defaults: v.optional(DefaultsSchema),
    sites: v.optional(v.record(simpleName, DefaultsSchema)),
    racks: v.optional(v.record(simpleName, RackSchema)),
    machines: v.optional(v.array(MachineSchema)),
  })),
  ...SHARED_SECTIONS,
});
export type RawStaticConfig = v.InferOutput<typeof StaticConfigSchema>;

/**
 * What the second pass works on: a valid config, or the valid parts of an invalid one, where
 * a machine or pool with a shape error is a null hole (so later indexes keep their paths).
 */
export interface ResolvableStaticConfig extends ResolvableSharedSections {
  inventory?: Omit<NonNullable<RawStaticConfig['inventory']>, 'machines'> & {
    machines?: (SalvagedMachine | null)[];
    /** The id of every machine whose id is well formed, holes included, so a duplicate id is reported with its machine's other errors. */
    machineIds?: (string | undefined)[];
  };
}

type RawAddress = v.InferOutput<typeof AddressSchema>;

/**
 * A machine as the second pass sees it: valid, or one with a field error, keeping its valid
 * fields (an invalid address is a null hole, so the others keep their paths) and naming the keys
 * it lost, so its references and duplicates are still checked in the same run.
 */
export type SalvagedMachine = Omit<RawMachine, 'addresses'> & {
  addresses?: (RawAddress | null)[];
  /** Keys whose value failed the schema (already reported), left out above. */
  invalidKeys?: readonly string[];
};

/** A machine's valid fields, or null when even its id is not usable. */
function salvageMachine(input: unknown): SalvagedMachine | null {
  const whole = validOrUndefined(MachineSchema, input);
  if (whole) return whole;
  const raw = asRecord(input);
  const id = validOrUndefined(machineId, raw.id);
  if (id === undefined) return null;
  const machine: Record<string, unknown> = { id };
  const invalidKeys: string[] = [];
  for (const [key, schema] of Object.entries(MachineSchema.entries)) {
    if (key === 'id' || key === 'addresses' || raw[key] === undefined) continue;
    const value = validOrUndefined(schema as v.GenericSchema<unknown, unknown>, raw[key]);
    if (value === undefined) invalidKeys.push(key);
    else machine[key] = value;
  }
  if (Array.isArray(raw.addresses)) machine.addresses = raw.addresses.map((a) => validOrUndefined(AddressSchema, a) ?? null);
  else if (raw.addresses !== undefined) invalidKeys.push('addresses');
  return { ...(machine as Omit<SalvagedMachine, 'invalidKeys'>), invalidKeys };
}

/**
 * The valid parts of a config that failed the schema, so the second pass can report its own
 * problems in the same run. A machine that depends on an invalid defaults, site or rack entry
 * is left out too: its merged settings would be guesses and its errors echoes.
 */
export function salvageStaticConfig(input: unknown): ResolvableStaticConfig {
  const root = asRecord(input);
  const inv = asRecord(root.inventory);
  const brokenSites = new Set<string>();
  const brokenRacks = new Set<string>();
  const entries = <T>(value: unknown, schema: v.GenericSchema<unknown, T>, broken: Set<string>) =>
    Object.fromEntries(Object.entries(asRecord(value)).map(([name, entry]) => {
      const parsed = validOrUndefined(schema, entry);
      if (!parsed) broken.add(name);
      return [name, parsed ?? ({} as T)];
    }));
  const defaults = validOrUndefined(DefaultsSchema, inv.defaults ?? {});
  const sites = entries(inv.sites, DefaultsSchema, brokenSites);
  const racks = entries(inv.racks, RackSchema, brokenRacks);
  const machines = Array.isArray(inv.machines)
    ? inv.machines.map((m) => {
        const machine = salvageMachine(m);
        if (!machine || !defaults) return null;
        const site = machine.site ?? (machine.rack !== undefined ? racks[machine.rack]?.site : undefined);
        if ((machine.rack !== undefined && brokenRacks.has(machine.rack)) || (site !== undefined && brokenSites.has(site))) return null;
        return machine;
      })
    : undefined;
  return {
    inventory: {
      authoritative: validOrUndefined(v.boolean(), inv.authoritative),
      matchBy: validOrUndefined(MatchBySchema, inv.matchBy),
      defaults: defaults ?? {},
      sites,
      racks,
      machines,
      machineIds: Array.isArray(inv.machines) ? inv.machines.map((m) => validOrUndefined(machineId, asRecord(m).id)) : undefined,
    },
    ...salvageSharedSections(root),
  };
}
