import type { V1Container } from '@kubernetes/client-node';

/**
 * A container's args as the kubelet runs them: `$(NAME)` replaced by the container's env var NAME
 * (a literal value, or a downward-API field given in `fields`, e.g. status.podIP), `$$` by `$`;
 * a reference to an unknown variable stays as written, as the kubelet leaves it.
 */
export function kubeletArgs(container: V1Container, fields: Record<string, string>): string[] {
  const env = new Map<string, string>();
  for (const e of container.env ?? []) {
    const field = e.valueFrom?.fieldRef?.fieldPath;
    if (e.value !== undefined) env.set(e.name, e.value);
    else if (field !== undefined) {
      const value = fields[field];
      if (value === undefined) throw new Error(`env ${e.name} takes ${field}: give its value`);
      env.set(e.name, value);
    }
  }
  return (container.args ?? []).map((arg) =>
    arg.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string | undefined) => (name === undefined ? '$' : env.get(name) ?? whole)));
}
