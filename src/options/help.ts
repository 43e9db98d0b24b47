/**
 * --help in upstream's layout (cobra + component-base PrintSections + pflag FlagUsages, unwrapped):
 * a description, the usage line, then one aligned section per flag group.
 */
import { flagDefaultText, flagNames, flagsByGroup, flagTypeName, groupTitle } from './describe.ts';
import { EXIT_CODES } from './exit-codes.ts';

const DESCRIPTION =
  'edge-ccm is a Kubernetes cloud-controller-manager for bare-metal, edge and private-cloud clusters:\n' +
  'a daemon that embeds the cloud specific control loops.';

export function renderHelp(): string {
  const sections = flagsByGroup().map(([group, defs]) => {
    const heads = defs.map((def) => {
      const type = flagTypeName(def);
      const names = flagNames(def);
      return `${def.shorthand === undefined ? '      ' : '  '}${names}${type ? ` ${type}` : ''}`;
    });
    const width = Math.max(...heads.map((head) => head.length)) + 3;
    const lines = defs.map((def, i) => {
      const head = (heads[i] as string).padEnd(width);
      const fallback = flagDefaultText(def);
      const usage = def.help + (fallback === undefined ? '' : ` (default ${fallback})`);
      return head + usage.replaceAll('\n', `\n${' '.repeat(width)}`);
    });
    return `\n${groupTitle(group)} flags:\n\n${lines.join('\n')}\n`;
  });
  const exitCodes = EXIT_CODES.map(([code, meaning]) => `  ${code}   ${meaning}`).join('\n');
  return `${DESCRIPTION}\n\nUsage:\n  edge-ccm [flags]\n${sections.join('')}\nExit codes:\n\n${exitCodes}\n`;
}
