import { existsSync } from 'node:fs';

/** A build to run side by side with others: `--variant=NAME:BINARY[::ENV=V,...]`. */
export interface Variant {
  name: string;
  binary: string;
  /** Extra environment of its processes; undefined when none was given. */
  env?: Record<string, string>;
}

/** The `--variant=` arguments of `args` (or `defaults` when there is none), each binary checked to exist. */
export function parseVariants(args: readonly string[], defaults: readonly string[]): Variant[] {
  const given = args.filter((a) => a.startsWith('--variant=')).map((a) => a.slice('--variant='.length));
  return (given.length ? given : defaults).map((v) => {
    const [head, envText] = v.split('::') as [string, string | undefined];
    const colon = head.indexOf(':');
    if (colon < 1) throw new Error(`--variant=${v}: NAME:BINARY[::ENV=V,...] expected`);
    const variant: Variant = { name: head.slice(0, colon), binary: head.slice(colon + 1) };
    if (envText) variant.env = Object.fromEntries(envText.split(',').map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
    if (!existsSync(variant.binary)) throw new Error(`--variant ${variant.name}: ${variant.binary} is missing (bun scripts/build.ts)`);
    return variant;
  });
}
