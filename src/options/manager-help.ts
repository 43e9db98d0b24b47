/**
 * The controller manager's --help (`edge-ccm --help`): its flag table by group, in the layout
 * src/options/help.ts draws. Apart from help.ts so that `speaker` and `vip`, whose own --help is
 * there, do not load the manager's flag table (src/options/flags.ts).
 */
import { groupTitle } from './describe.ts';
import type { FlagDef } from './flag-def.ts';
import { flagsByGroup } from './flags.ts';
import { renderExitCodes, renderFlagLines, wrap } from './help.ts';

const DESCRIPTION =
  'edge-ccm is a Kubernetes cloud-controller-manager for bare-metal, edge and\n' +
  'private-cloud clusters: a daemon that embeds the cloud specific control loops.';

export interface HelpContext {
  /** Columns to wrap at. */
  width: number;
  /** The providers linked into the binary, for --cloud-provider. */
  providers: readonly string[];
  /** The subcommands, for the usage lines. */
  commands: readonly { name: string; summary: string }[];
}

export function renderHelp(ctx: HelpContext): string {
  const sections = flagsByGroup().map(([group, defs]) => {
    const helpOf = (def: FlagDef) => (def.name === 'cloud-provider' && ctx.providers.length ? `${def.help} Linked providers: ${ctx.providers.join(', ')}.` : def.help);
    return `\n${groupTitle(group)} flags:\n\n${renderFlagLines(defs, ctx.width, helpOf)}\n`;
  });
  const nameWidth = Math.max(...ctx.commands.map((c) => c.name.length)) + 3;
  const commands = ctx.commands.map((c) => `  ${c.name.padEnd(nameWidth)}${wrap(c.summary, nameWidth + 2, ctx.width)}`).join('\n');
  return (
    `${DESCRIPTION}\n\nUsage:\n  edge-ccm [flags]\n  edge-ccm [${ctx.commands.map((c) => c.name).join('|')}] [flags]\n\n` +
    `Commands:\n${commands}\n${sections.join('')}\n${renderExitCodes(ctx.width)}`
  );
}
