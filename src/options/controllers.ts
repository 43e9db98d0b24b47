/**
 * The --controllers selection, with upstream's names, aliases and semantics
 * (k8s.io/controller-manager IsControllerEnabled): for each controller the first entry naming it
 * decides (`name` on, `-name` off); without one, it runs iff `*` is listed and it is not one of
 * the disabled-by-default controllers (upstream's node-ipam-controller, and node-csr-approval), which run only when named. The names and aliases
 * are src/names.ts's, the one list the controller table (src/app/controllers.ts) is checked against.
 */
import { CONTROLLER_ALIASES, CONTROLLER_NAMES, CONTROLLERS_DISABLED_BY_DEFAULT, type ControllerName } from '../names.ts';

export { CONTROLLER_ALIASES, CONTROLLER_NAMES, CONTROLLERS_DISABLED_BY_DEFAULT, type ControllerName };

export type ResolvedControllers =
  | { ok: true; enabled: ReadonlySet<ControllerName> }
  | { ok: false; errors: string[] };

export function resolveControllers(list: readonly string[]): ResolvedControllers {
  const errors: string[] = [];
  // Canonical spelling of each entry ("-route" -> "-node-route-controller"), as upstream's ApplyTo.
  const canonical = list.map((entry) => {
    if (entry === '*') return entry;
    const disabled = entry.startsWith('-');
    const bare = disabled ? entry.slice(1) : entry;
    const name = canonicalControllerName(bare);
    if (!name) {
      errors.push(`${JSON.stringify(bare)} is not in the list of known controllers (known: ${knownNames()})`);
      return entry;
    }
    return disabled ? `-${name}` : name;
  });
  if (errors.length > 0) return { ok: false, errors };

  const enabled = new Set(CONTROLLER_NAMES.filter((name) => isControllerEnabled(name, canonical)));
  return { ok: true, enabled };
}

function canonicalControllerName(name: string): ControllerName | undefined {
  if ((CONTROLLER_NAMES as readonly string[]).includes(name)) return name as ControllerName;
  return CONTROLLER_ALIASES[name];
}

function isControllerEnabled(name: ControllerName, entries: readonly string[]): boolean {
  let star = false;
  for (const entry of entries) {
    if (entry === name) return true;
    if (entry === `-${name}`) return false;
    if (entry === '*') star = true;
  }
  return star && !CONTROLLERS_DISABLED_BY_DEFAULT.has(name);
}

function knownNames(): string {
  const aliases = Object.entries(CONTROLLER_ALIASES).map(([alias, name]) => `${alias} (${name})`);
  return `${CONTROLLER_NAMES.join(', ')}; aliases: ${aliases.join(', ')}`;
}
