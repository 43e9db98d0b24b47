import { readCloudConfigFile } from '../cloud/config-file.ts';
import { parseCloudConfigs, parseProviderNames } from '../cloud/provider-list.ts';
import { errorMessage } from '../util/errors.ts';
import type { ProviderRegistry } from '../cloud/registry.ts';
import { EXIT_INVALID_INPUT, EXIT_OK } from '../options/exit-codes.ts';
import { didYouMean } from '../util/did-you-mean.ts';

const VALIDATE_FLAGS = ['cloud-provider', 'cloud-config'];

/** The flags after `validate` that it does not know, each with "did you mean" when one is near. */
function unknownFlags(words: readonly string[]): string[] {
  const unknown: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    if (!word.startsWith('--')) continue;
    const name = word.slice(2).split('=')[0]!;
    if (VALIDATE_FLAGS.includes(name)) {
      if (!word.includes('=')) i++; // its value
      continue;
    }
    unknown.push(`--${name}${didYouMean(name, VALIDATE_FLAGS, (n) => `--${n}`)}`);
  }
  return unknown;
}

/**
 * `edge-ccm validate --cloud-provider NAME --cloud-config FILE`: checks a provider's config
 * without a cluster; prints every problem with its path and line. Several providers
 * (`--cloud-provider a,b --cloud-config a=FILE,b=FILE`): each file by its provider's validator. Exit 0 when valid; 2 when
 * invalid or misused, the code the controller manager exits with on the same file.
 */
export async function runValidate(argv: string[], providers: ProviderRegistry, after: readonly string[] = []): Promise<number> {
  const unknown = unknownFlags(after);
  for (const flag of unknown) console.error(`error: validate: unknown flag ${flag}`);
  const flag = (name: string): string | undefined => {
    const i = argv.indexOf(`--${name}`);
    if (i >= 0) return argv[i + 1];
    return argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  };
  const provider = flag('cloud-provider');
  const configPath = flag('cloud-config');
  if (unknown.length > 0) return EXIT_INVALID_INPUT; // a missing flag may be one of them, misspelt
  if (!provider || !configPath) {
    console.error('error: validate needs --cloud-provider and --cloud-config');
    return EXIT_INVALID_INPUT;
  }
  let files: Map<string, string | undefined>;
  try {
    files = parseCloudConfigs(configPath, parseProviderNames(provider, providers.names()));
  } catch (e) {
    for (const line of errorMessage(e).split('\n')) console.error(`error: ${line}`);
    return EXIT_INVALID_INPUT;
  }
  let invalid = false;
  for (const [name, path] of files) {
    if (!(await validateOne(providers, name, path, files.size > 1))) invalid = true;
  }
  return invalid ? EXIT_INVALID_INPUT : EXIT_OK;
}

/** One provider's file checked by its validator: whether it is valid (its problems printed). */
async function validateOne(providers: ProviderRegistry, provider: string, configPath: string | undefined, several: boolean): Promise<boolean> {
  if (configPath === undefined) {
    console.log(`${provider}: no file given (${provider}=PATH in --cloud-config); it starts without one if it can`);
    return true;
  }
  const validator = providers.validator(provider);
  if (!validator) {
    console.error(`error: --cloud-provider: "${provider}" has no config validator (known: ${providers.names().join(', ')})`);
    return false;
  }
  let text: string;
  try {
    text = readCloudConfigFile(configPath);
  } catch (e) {
    console.error(`error: --cloud-config: cannot read ${configPath}: ${(e as Error).message}`);
    return false;
  }
  const found = validator(text, configPath);
  for (const w of found.filter((p) => p.warning)) console.error(`${configPath}:${w.line ?? '?'}: ${w.path}: warning: ${w.message}`);
  const problems = found.filter((p) => !p.warning);
  if (problems.length === 0) {
    console.log(`${configPath}: valid ${provider} configuration`);
    return true;
  }
  for (const p of problems) console.error(`${configPath}:${p.line ?? '?'}: ${p.path}: ${p.message}`);
  console.error(`${problems.length} problem${problems.length === 1 ? '' : 's'} found${several ? ` in the ${provider} provider's file` : ''}`);
  return false;
}
