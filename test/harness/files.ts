import { renameSync, writeFileSync } from 'node:fs';

/**
 * Replaces a file in one step (write a sibling, then rename), as editors and ConfigMap volumes
 * do, so a process watching it never reads half a file.
 */
export function replaceFile(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}
