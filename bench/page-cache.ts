import { spawnSync } from 'node:child_process';

/**
 * Drops each binary's pages from the page cache before a footprint bench starts its processes, so
 * every side reads its code from disk the same way (as after a node's reboot). Measured (session
 * 15): how a binary's pages came into the cache changes the RSS of the processes that map it by
 * several MiB. A file just written (a build, a copy) sits in the cache in large folios, and a fault
 * maps a whole folio: a vip started from a freshly copied binary held 53.8 MiB and "touched" 19.6
 * MiB of machine code in five idle minutes; from the same binary read cold, 50.5 MiB and 5.6.
 * `dd iflag=nocache count=0` asks the kernel to drop the whole file (coreutils' documented idiom);
 * `sync` first, since dirty pages are not dropped. Pages another running process maps stay.
 */
export function evictFromPageCache(paths: readonly string[]): void {
  for (const path of new Set(paths)) {
    for (const argv of [['sync', path], ['dd', `if=${path}`, 'iflag=nocache', 'count=0', 'status=none']]) {
      const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`${argv.join(' ')}: ${r.stderr || r.error?.message || `exit ${r.status}`}`);
    }
  }
}
