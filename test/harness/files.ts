import { chownSync, renameSync, writeFileSync } from 'node:fs';

/**
 * Replaces a file in one step (write a sibling, then rename), as editors and ConfigMap volumes
 * do, so a process watching it never reads half a file.
 */
export function replaceFile(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

/** nogroup: a group the test process is not in (tests run as root, whose own group is 0). */
export const FOREIGN_GID = 65534;

/**
 * Gives a file to a group the test process is not in, so its group-read bit exposes it to others
 * (group-read by a group edge-ccm is in is no InsecureSecretFile warning: a Secret volume's 0440).
 */
export function giveToForeignGroup(path: string): void {
  if (process.getgroups?.().includes(FOREIGN_GID)) throw new Error(`this test process is in group ${FOREIGN_GID}: it cannot stand for a foreign group`);
  chownSync(path, process.getuid?.() ?? 0, FOREIGN_GID);
}
