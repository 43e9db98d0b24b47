/**
 * Structured logging: one line per event, text (klog-like `key=value`) or JSON, with stable keys
 * (controller, node, service, error). Verbosity follows klog's -v: debug(level, ...) prints only
 * when level <= the configured verbosity. No global logger: the app builds one and hands
 * children (`with`) to the pieces it wires.
 */
import { verbosityFor, type VModuleRule } from './options/vmodule.ts';

export type LogFormat = 'text' | 'json';
export type LogFields = Record<string, unknown>;

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Printed only when level <= verbosity (klog's V(level).Info). */
  debug(level: number, msg: string, fields?: LogFields): void;
  enabled(level: number): boolean;
  with(fields: LogFields): Logger;
}

export interface LoggerOptions {
  format?: LogFormat;
  verbosity?: number;
  /** --vmodule: a verbosity per component (see VMODULE_FIELDS), overriding `verbosity` for the loggers of matching components. */
  vmodule?: readonly VModuleRule[];
  write?: (line: string) => void;
  /** Where warnings and errors go when they are split from the rest (--log-*-split-stream); default `write`. */
  writeErrors?: (line: string) => void;
  now?: () => Date;
}

/** The fields that name what a logger is for, which --vmodule patterns are matched against. */
const VMODULE_FIELDS = ['controller', 'component', 'provider', 'informer'];

export function createLogger(opts: LoggerOptions = {}, base: LogFields = {}): Logger {
  const names = VMODULE_FIELDS.map((k) => base[k]).filter((n): n is string => typeof n === 'string');
  return buildLogger(opts, base, opts.vmodule?.length ? verbosityFor(opts.vmodule, names, opts.verbosity ?? 0) : (opts.verbosity ?? 0));
}

/**
 * The logger of `base` at `verbosity`. A child (`with`) whose fields name no component keeps its
 * parent's verbosity without matching --vmodule again: the controllers make one per node they
 * touch (thousands per pass), and most log nothing at the default verbosity.
 */
function buildLogger(opts: LoggerOptions, base: LogFields, verbosity: number): Logger {
  const format = opts.format ?? 'text';
  const write = opts.write ?? ((line: string) => process.stderr.write(line + '\n'));
  const writeErrors = opts.writeErrors ?? write;
  const now = opts.now ?? (() => new Date());
  const emit = (level: 'info' | 'warn' | 'error', msg: string, fields?: LogFields, v?: number) => {
    const all = { ...base, ...fields };
    (level === 'info' ? write : writeErrors)(format === 'json' ? jsonLine(now(), level, msg, all, v) : textLine(now(), level, msg, all));
  };
  return {
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    error: (msg, fields) => emit('error', msg, fields),
    debug: (level, msg, fields) => {
      if (level <= verbosity) emit('info', msg, fields, level);
    },
    enabled: (level) => level <= verbosity,
    with: (fields) => VMODULE_FIELDS.some((k) => k in fields) ? createLogger(opts, { ...base, ...fields }) : buildLogger(opts, { ...base, ...fields }, verbosity),
  };
}

/** A logger that drops everything (tests, tools). */
export const silentLogger: Logger = createLogger({ write: () => {} });

function fieldValue(v: unknown): unknown {
  if (v instanceof Error) return v.message;
  return v;
}

function jsonLine(ts: Date, level: string, msg: string, fields: LogFields, v?: number): string {
  const out: Record<string, unknown> = { ts: ts.toISOString(), level, msg };
  if (v !== undefined) out.v = v;
  for (const [k, val] of Object.entries(fields)) if (val !== undefined) out[k] = fieldValue(val);
  return JSON.stringify(out);
}

function textLine(ts: Date, level: string, msg: string, fields: LogFields): string {
  const parts = [ts.toISOString(), level.toUpperCase(), JSON.stringify(msg)];
  for (const [k, val] of Object.entries(fields)) {
    if (val === undefined) continue;
    const v = fieldValue(val);
    const s = typeof v === 'string' ? v : JSON.stringify(v);
    parts.push(`${k}=${/^[\w./:@-]+$/.test(s) ? s : JSON.stringify(s)}`);
  }
  return parts.join(' ');
}
