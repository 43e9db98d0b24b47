import { readdirSync, rmdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A cgroup of its own (the same name in every mounted hierarchy, v1 and v2 alike) for what a test
 * runs under a container manager (podman's --cgroup-parent, systemd-nspawn's payload), so what
 * they create is found and removed afterwards and nothing is left in the machine's root cgroup.
 */
const CGROUP_ROOT = '/sys/fs/cgroup';

/** The hierarchies mounted here: /sys/fs/cgroup itself on a v2-only host, else each of its dirs. */
function hierarchies(): string[] {
  try {
    statSync(join(CGROUP_ROOT, 'cgroup.procs'));
    return [CGROUP_ROOT];
  } catch {
    return readdirSync(CGROUP_ROOT).map((d) => join(CGROUP_ROOT, d)).filter((d) => {
      try {
        return statSync(join(d, 'cgroup.procs')).isFile();
      } catch {
        return false;
      }
    });
  }
}

/** The cgroup dirs named `name` under each of `parents` (paths inside a hierarchy), in every hierarchy. */
function candidates(name: string, parents: readonly (string | undefined)[]): string[] {
  if (!/^[\w.-]+$/.test(name)) throw new Error(`cgroup name ${name}: letters, digits, . _ - only`);
  const under = [...new Set(parents.filter((p): p is string => p !== undefined).concat(parents.length ? [] : ['/']))];
  return hierarchies().flatMap((h) => under.map((p) => join(h, p, name)));
}

/** A shell command that removes the cgroup `name` (depth first; a cgroup still holding a process stays). */
export function removeCgroupCommand(name: string, parents: readonly (string | undefined)[] = ['/']): string {
  return `for d in ${candidates(name, parents).join(' ')}; do [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \\; 2>/dev/null; done; true`;
}

/** Removes the cgroup `name` (under each of `parents`) from every hierarchy, deepest first; returns those that could not go. */
export function removeCgroup(name: string, parents: readonly (string | undefined)[] = ['/']): string[] {
  const left: string[] = [];
  for (const top of candidates(name, parents)) {
    const dirs: string[] = [];
    const walk = (dir: string) => {
      let entries: string[];
      try {
        entries = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
      } catch {
        return;
      }
      for (const e of entries) walk(join(dir, e));
      dirs.push(dir);
    };
    walk(top);
    for (const dir of dirs) {
      try {
        rmdirSync(dir);
      } catch {
        left.push(dir);
      }
    }
  }
  return left;
}
