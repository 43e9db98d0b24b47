/**
 * Structured logging: one line per event, text (klog-like `key=value`) or JSON, with stable keys
 * (controller, node, service, error). Verbosity follows klog's -v: debug(level, ...) prints only
 * when level <= the configured verbosity. No global logger: the app builds one and hands
 * children (`with`) to the pieces it wires.
 */
import { verbosityFor, type VModuleRule } from './util/vmodule.ts';

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
 * The logger of `base` at `verbosity`: one object with its methods on the prototype, since the
 * controllers make a child (`with`) per node they touch, thousands per pass, and most log nothing
 * at the default verbosity. A child whose fields name no component keeps its parent's verbosity
 * without matching --vmodule again.
 */
function buildLogger(opts: LoggerOptions, base: LogFields, verbosity: number): Logger {
  return new FieldLogger(opts, base, verbosity);
}

/**
 * The runtime's console, not process.stderr: a synchronous write of the line (nothing lost when
 * the process dies after it), and no node stream modules loaded. process.stderr's stream costs a
 * process 1.7 MiB of heap and 2.6 MiB of mapped code (BENCHMARKS.md, "What the runtime's node
 * modules cost"). A single string argument is printed as it is: no %-formatting.
 */
export const writeStderr = (line: string): void => console.error(line);
export const writeStdout = (line: string): void => console.log(line);

class FieldLogger implements Logger {
  constructor(private readonly opts: LoggerOptions, private readonly base: LogFields, private readonly verbosity: number) {}

  info(msg: string, fields?: LogFields): void {
    this.emit('info', msg, fields);
  }

  warn(msg: string, fields?: LogFields): void {
    this.emit('warn', msg, fields);
  }

  error(msg: string, fields?: LogFields): void {
    this.emit('error', msg, fields);
  }

  debug(level: number, msg: string, fields?: LogFields): void {
    if (level <= this.verbosity) this.emit('info', msg, fields, level);
  }

  enabled(level: number): boolean {
    return level <= this.verbosity;
  }

  with(fields: LogFields): Logger {
    const all = { ...this.base, ...fields };
    return VMODULE_FIELDS.some((k) => k in fields) ? createLogger(this.opts, all) : new FieldLogger(this.opts, all, this.verbosity);
  }

  private emit(level: 'info' | 'warn' | 'error', msg: string, fields?: LogFields, v?: number): void {
    const { opts } = this;
    const write = opts.write ?? writeStderr;
    const all = { ...this.base, ...fields };
    const now = opts.now?.() ?? new Date();
    const line = opts.format === 'json' ? jsonLine(now, level, msg, all, v) : textLine(now, level, msg, all);
    (level === 'info' ? write : (opts.writeErrors ?? write))(line);
  }
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
