/**
 * --help in upstream's layout (cobra + component-base PrintSections + pflag FlagUsagesWrapped): a
 * description, the usage lines, then one aligned section per flag group, help texts wrapped to the
 * terminal's width (80 columns when stdout is not a terminal, as upstream's term.TerminalSize
 * fallback leaves pflag at 0 = no wrap; edge-ccm wraps at 80 then, so a piped --help stays readable).
 * The subcommands' help is here; the controller manager's, which reads its flag table, is in
 * manager-help.ts.
 */
import { flagDefaultText, flagNames, flagTypeName, type DescribedFlag } from './describe.ts';
import { EXIT_CODES } from './exit-codes.ts';
import type { FlagDef } from './flag-def.ts';
import { SPEAKER_FLAGS } from './speaker.ts';
import { VIP_FLAGS } from './vip.ts';

/** pflag's rule: with fewer columns left than this, the text goes as a block on the next line, at BLOCK_INDENT. */
const MIN_WRAP_COLUMNS = 24;
const BLOCK_INDENT = 16;

/** `edge-ccm speaker --help`: the same layout, its own table (src/options/speaker.ts). */
export function renderSpeakerHelp(width: number): string {
  return (
    `${SPEAKER_DESCRIPTION}\n\nUsage:\n  edge-ccm speaker --cloud-config FILE [--liveness-key-file FILE] [flags]\n\n` +
    `Flags:\n\n${renderFlagLines(SPEAKER_FLAGS, width, (def) => def.help)}\n\n${renderExitCodes(width)}`
  );
}

/** `edge-ccm vip --help`. */
export function renderVipHelp(width: number): string {
  return (
    `${VIP_DESCRIPTION}\n\nUsage:\n  edge-ccm vip --cloud-config FILE --liveness-key-file FILE [flags]\n\n` +
    `Flags:\n\n${renderFlagLines(VIP_FLAGS, width, (def) => def.help)}\n\n${renderExitCodes(width)}`
  );
}

export const VIP_DESCRIPTION =
  'Holds the control-plane VIP (controlPlaneEndpoint: the API server\'s own address) on the\n' +
  'control-plane hosts: each checks its local API server and, while it answers, competes for the\n' +
  'address with the others over signed UDP heartbeats; the holder answers ARP/NDP for it\n' +
  '(docs/networking/control-plane-vip.md). Needs no API server and no credentials: run it as a\n' +
  'systemd unit or a static pod on every control-plane host, before kubeadm init.';

export const SPEAKER_DESCRIPTION =
  'Answers ARP and NDP for the load-balancer addresses of announce: l2 pools that this node is\n' +
  'elected for (docs/networking/l2.md); with bgp.loadBalancers.announceFrom: nodes, also announces\n' +
  'the addresses of announce: bgp pools this node may serve over its own BGP sessions, each tied\n' +
  'to a BFD session (docs/networking/bgp.md). Runs on every node with host networking.';

/** One aligned block of flags, pflag's FlagUsagesWrapped: names and type, three spaces, the help and its default. */
export function renderFlagLines<D extends DescribedFlag & FlagDef>(defs: readonly D[], width: number, helpOf: (def: D) => string): string {
  const heads = defs.map((def) => {
    const type = flagTypeName(def);
    return `${def.shorthand === undefined ? '      ' : '  '}${flagNames(def)}${type ? ` ${type}` : ''}`;
  });
  const column = Math.max(...heads.map((head) => head.length)) + 3;
  return defs
    .map((def, i) => {
      const fallback = flagDefaultText(def);
      return (heads[i] as string).padEnd(column) + wrap(helpOf(def) + (fallback === undefined ? '' : ` (default ${fallback})`), column, width);
    })
    .join('\n');
}

export function renderExitCodes(width: number): string {
  return `Exit codes:\n\n${EXIT_CODES.map(([code, meaning]) => `  ${code}   ${wrap(meaning, 6, width)}`).join('\n')}\n`;
}

/**
 * Text that starts at column `indent`, wrapped at spaces so no line passes `columns` (a word longer
 * than the room stands alone); its own line breaks are kept, and every continuation line is indented
 * to `indent`. Too little room: as pflag, the text starts on the next line as a block at column 16.
 */
export function wrap(text: string, indent: number, columns: number): string {
  if (columns - indent < MIN_WRAP_COLUMNS) return `\n${' '.repeat(BLOCK_INDENT)}${wrap(text, BLOCK_INDENT, columns)}`;
  const room = columns - indent;
  const pad = ' '.repeat(indent);
  const out: string[] = [];
  for (const paragraph of text.split('\n')) {
    let line = '';
    for (const word of paragraph.split(' ')) {
      if (line !== '' && line.length + 1 + word.length > room) {
        out.push(line);
        line = word;
      } else {
        line = line === '' ? word : `${line} ${word}`;
      }
    }
    out.push(line);
  }
  return out.join(`\n${pad}`);
}

/** The width --help wraps at: the terminal's columns, or 80 when stdout is not a terminal. */
export function helpWidth(stream: { isTTY?: boolean; columns?: number } = process.stdout): number {
  return stream.isTTY && stream.columns ? stream.columns : 80;
}
