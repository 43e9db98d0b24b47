// Baked in by scripts/build.ts through `define`; `bun run` from source reports a dev version.
declare const EDGE_CCM_VERSION: string;
declare const EDGE_CCM_COMMIT: string;

export const version: string = typeof EDGE_CCM_VERSION === 'string' ? EDGE_CCM_VERSION : '0.0.0-dev';
export const commit: string = typeof EDGE_CCM_COMMIT === 'string' ? EDGE_CCM_COMMIT : 'unknown';

export function versionLine(): string {
  return `edge-ccm ${version} (commit ${commit}, bun ${Bun.version})`;
}
