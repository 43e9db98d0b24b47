/**
 * Writes docs/flags.md from the flag table (src/options/flags.ts). Usage: bun scripts/gen-flags-doc.ts
 * A unit test fails while the committed file differs from what this would write.
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { renderFlagsMarkdown } from '../src/options/index.ts';

export const FLAGS_DOC_PATH = join(resolve(import.meta.dir, '..'), 'docs', 'flags.md');

if (import.meta.main) {
  writeFileSync(FLAGS_DOC_PATH, renderFlagsMarkdown());
  console.log(`wrote ${FLAGS_DOC_PATH}`);
}
