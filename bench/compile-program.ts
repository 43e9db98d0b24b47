/**
 * Compiles one small program the way scripts/build.ts compiles edge-ccm (`--minify --bytecode`,
 * one executable): the floors and probes the footprint benches set beside it pay what a compiled
 * edge-ccm pays for the runtime.
 */
export function compileProgram(source: string, outfile: string): void {
  const built = Bun.spawnSync([process.execPath, 'build', '--compile', '--minify', '--bytecode', `--outfile=${outfile}`, source], { stdout: 'ignore', stderr: 'pipe' });
  if (built.exitCode !== 0) throw new Error(`bun build --compile ${source}: ${built.stderr.toString().slice(-2000)}`);
}
