import { readBoundedFileSync } from '../util/bounded-file.ts';

/**
 * The --cloud-config file, as the daemon and `validate` read it for any provider: a regular file
 * of at most MAX_CONFIG_FILE_BYTES (not /dev/zero, not a FIFO), checked before reading. Measured
 * with the static provider: loading holds about 100 bytes of memory per byte of YAML (a 0.9 MB,
 * 5000-machine inventory peaked at 210 MB RSS in `validate`; 3.6 MB at 470 MB), so 4 MiB bounds
 * memory to about half a gigabyte and leaves room for 20,000 machines (a ConfigMap holds 1 MiB).
 */
export const MAX_CONFIG_FILE_BYTES = 4 * 1024 * 1024;

/** Reads the --cloud-config file; throws a message naming the file (FileRefusedError when it must not be read). */
export function readCloudConfigFile(path: string): string {
  return readBoundedFileSync(path, MAX_CONFIG_FILE_BYTES);
}
