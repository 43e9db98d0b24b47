import { statSync } from 'node:fs';
import { readBoundedFileSync } from '../util/bounded-file.ts';
import { resolveCredentialPath } from '../util/credentials-directory.ts';
import type { ConfigPath } from './issues.ts';
import { MAX_REFERENCED_FILE_BYTES } from './limits.ts';

/**
 * Secrets in the providers' config files: which keys hold one (their values are never shown in
 * an error, a log line or an event), how the files they name are read (bounded: regular files
 * only, MAX_REFERENCED_FILE_BYTES at most), and the warning for a secret file others can read.
 * Shared by every provider whose config is a file.
 */

/** Where secrets come from; tests replace it. */
export interface SecretSource {
  readFile(path: string): string;
  /** A file's permission bits and whether its group is one of ours (for the warning about secret files others can read); undefined when unknown. */
  permissions?(path: string): FilePermissions | undefined;
  env(name: string): string | undefined;
}

export interface FilePermissions {
  mode: number;
  /** The file's group is one this process is in (its group bits expose it to nobody else). */
  groupIsOwn: boolean;
}

/** Keys whose value is a secret, in any provider's file (`passwordFile` and the like name one; they are not one). */
export const SECRET_KEYS: ReadonlySet<string> = new Set(['password', 'tokenSecret']);

/** Whether a value at `path` is (inside) a secret. */
export function isSecretPath(path: readonly (string | number)[]): boolean {
  return path.some((segment) => typeof segment === 'string' && SECRET_KEYS.has(segment));
}

/** The event reason (and log field) of a secret file readable by group or others. */
export const INSECURE_SECRET_FILE = 'InsecureSecretFile';

function ownGroups(): Set<number> {
  return new Set([process.getgid?.() ?? -1, ...(process.getgroups?.() ?? [])]);
}

/** Secrets from this process's files and environment. */
export const processSecrets: SecretSource = {
  readFile: (path) => readBoundedFileSync(path, MAX_REFERENCED_FILE_BYTES),
  permissions: (path) => {
    try {
      const stat = statSync(path);
      return { mode: stat.mode & 0o777, groupIsOwn: ownGroups().has(stat.gid) };
    } catch {
      return undefined;
    }
  },
  env: (name) => process.env[name],
};

/** A problem that does not stop the config from loading, with the event reason it is reported under. */
export interface ConfigWarningIssue {
  reason: string;
  path: ConfigPath;
  message: string;
}

/**
 * The files and variables one load of a config reads: each file once (a 500-machine inventory
 * shares a handful), a read failure given to every user of the file, and one warning per
 * secret file that its group or others may read.
 */
export class SecretFiles {
  readonly warnings: ConfigWarningIssue[] = [];
  private readonly files = new Map<string, string | Error>();
  private readonly checked = new Set<string>();

  constructor(private readonly source: SecretSource) {}

  /**
   * The text of `file`, named by `key` at `path`; throws what reading it threw. A secret's file
   * (not a CA file) is checked for its permissions.
   */
  read(file: string, key: string, path: ConfigPath, secret: boolean): string {
    // `${CREDENTIALS_DIRECTORY}/NAME`: systemd's LoadCredential= or the Deployment's Secret volume.
    const onDisk = () => resolveCredentialPath(file, (name) => this.source.env(name));
    if (!this.files.has(file)) {
      try {
        this.files.set(file, this.source.readFile(onDisk()));
      } catch (e) {
        this.files.set(file, e instanceof Error ? e : new Error(String(e)));
      }
    }
    const got = this.files.get(file)!;
    if (got instanceof Error) throw got;
    if (secret && !this.checked.has(file)) {
      this.checked.add(file);
      const permissions = this.source.permissions?.(onDisk());
      const exposure = exposedTo(permissions);
      if (permissions && exposure) {
        this.warnings.push({
          reason: INSECURE_SECRET_FILE,
          path,
          message: `${key} ${file} is readable by ${exposure} (mode ${modeText(permissions.mode)}): make it readable by edge-ccm's user or group only (chmod 0400 or 0600; a Secret volume: defaultMode 0440 with the pod's fsGroup)`,
        });
      }
    }
    return got;
  }

  env(name: string): string | undefined {
    return this.source.env(name);
  }
}

function exposedTo(permissions: FilePermissions | undefined): string | undefined {
  if (permissions === undefined) return undefined;
  // Group-read by a group this process is in exposes nothing to anyone else: it is how a
  // Kubernetes Secret volume reaches a non-root pod (files 0440, group = the pod's fsGroup).
  const group = (permissions.mode & 0o040) !== 0 && !permissions.groupIsOwn;
  const other = (permissions.mode & 0o004) !== 0;
  if (group && other) return 'its group and others';
  if (group) return 'its group';
  if (other) return 'others';
  return undefined;
}

function modeText(mode: number): string {
  return mode.toString(8).padStart(4, '0');
}

/**
 * Why a URL carrying a user or password (`https://user:pass@host`) is refused; the message never
 * repeats the URL (it holds the secret). Credentials have keys of their own, read from files.
 */
export function urlUserinfoError(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined; // not a URL at all: the schema's URL check says so
  }
  if (url.username === '' && url.password === '') return undefined;
  return 'must not contain a user or password (user:password@): credentials have keys of their own (the URL is not shown, it holds one)';
}
