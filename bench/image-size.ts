/**
 * What an edge node pulls (issue 38): edge-ccm's image beside images of the anchors built as their
 * Dockerfiles build them, all linux/amd64.
 *
 * - edge-ccm: the linux/amd64 manifest of scripts/build-image.sh's OCI archive (--edge-ccm-archive;
 *   built with --local-base: the glibc stage from Debian's libc6, as the pinned debian:bookworm-slim
 *   would give).
 * - MetalLB's speaker v0.15.2: speaker/Dockerfile's final stage (FROM gcr.io/distroless/static)
 *   FROM scratch here, with what it copies: the speaker, frr-metrics and cp-tool built with the
 *   Dockerfile's `CGO_ENABLED=0 go build -ldflags "-X ..."` (not stripped), frr-reloader.sh and
 *   LICENSE. The distroless base is left out (no registry here).
 * - kube-vip: its Dockerfile (FROM scratch): the Makefile's `go build -ldflags "-s -w -X=... -extldflags
 *   -static"` with CGO_ENABLED=0, and a CA bundle (this machine's Debian ca-certificates.crt in place
 *   of the Alpine one the Dockerfile copies).
 *
 * For each: every layer uncompressed (its tar) and compressed as a registry push stores it (gzip,
 * podman's default, and zstd), the manifest and config, and `podman save` as docker-archive
 * (uncompressed layers) with gzip -6 and zstd -3 of that archive, and as oci-archive (podman 4.3
 * gzips its layers). podman runs with a
 * store of its own in a temp dir (harness/podman.ts: runc, cgroupfs, vfs), removed at the end.
 *
 *   bun bench/image-size.ts --edge-ccm-archive=dist/edge-ccm-VERSION.oci.tar
 *     [--metallb-src=DIR] [--kube-vip-src=DIR] [--bins=DIR]
 *
 * The sources are the anchors' modules as scripts/install-anchors.sh prepares them (bench/anchors.ts);
 * their binaries are built into --bins (default: beside them, by version) when missing (Go, modules
 * from the local cache only).
 */
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, copyFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { tempDir } from '../test/harness/ccm-process.ts';
import { Podman } from '../test/harness/podman.ts';
import { anchors } from './anchors.ts';
import { stringOption as opt } from './args.ts';

const args = process.argv.slice(2);
const ARCHIVE = resolve(opt('edge-ccm-archive', ''));
const SRC = { metallb: opt('metallb-src', '') || anchors().metallbSrc, 'kube-vip': opt('kube-vip-src', '') || anchors().kubeVipSrc };
const BINS = opt('bins', '') || join(dirname(anchors().kubeVip), `image-bins-metallb-${anchors().versions.metallb}-kube-vip-${anchors().versions.kubeVip}`);
const GO = '/usr/local/go/bin/go';
if (!opt('edge-ccm-archive', '') || !existsSync(ARCHIVE)) throw new Error(`--edge-ccm-archive=${opt('edge-ccm-archive', '')}: build it with scripts/build-image.sh --local-base OUTPUT`);
for (const [name, dir] of Object.entries(SRC)) if (!existsSync(join(dir, 'go.mod'))) throw new Error(`--${name}-src=${dir}: no go.mod there (the anchor's module source, as scripts/install-anchors.sh prepares it)`);

function run(cmd: string[], cwd?: string, env: Record<string, string> = {}): string {
  const r = Bun.spawnSync(cmd, { cwd, env: { ...process.env, ...env }, stdout: 'pipe', stderr: 'pipe' });
  if (r.exitCode !== 0) throw new Error(`${cmd.join(' ')} exited ${r.exitCode}: ${r.stderr.toString().slice(-2000)}`);
  return r.stdout.toString();
}

/** Builds the anchors' binaries as their Dockerfiles do, once (Go's module cache only: GOPROXY=off). */
function anchorBinaries(): { metallb: string; kubeVip: string } {
  const goEnv = { CGO_ENABLED: '0', GOOS: 'linux', GOARCH: 'amd64', GOPROXY: 'off', GOFLAGS: '-mod=mod' };
  const metallb = join(BINS, 'metallb');
  const kubeVip = join(BINS, 'kube-vip');
  mkdirSync(metallb, { recursive: true });
  mkdirSync(kubeVip, { recursive: true });
  const x = "-X 'go.universe.tf/metallb/internal/version.gitCommit=dev' -X 'go.universe.tf/metallb/internal/version.gitBranch=dev'";
  for (const [out, pkg] of [['frr-metrics', 'frr-tools/metrics/exporter.go'], ['cp-tool', 'frr-tools/cp-tool/cp-tool.go'], ['speaker', './speaker']] as const) {
    if (!existsSync(join(metallb, out))) run([GO, 'build', '-o', join(metallb, out), '-ldflags', x, pkg], SRC.metallb, goEnv);
  }
  const version = /^VERSION := (\S+)/m.exec(readFileSync(join(SRC['kube-vip'], 'Makefile'), 'utf8'))?.[1] ?? 'unknown';
  if (!existsSync(join(kubeVip, 'kube-vip'))) run([GO, 'build', '-ldflags', `-s -w -X=main.Version=${version} -X=main.Build=local -extldflags -static`, '-o', join(kubeVip, 'kube-vip')], SRC['kube-vip'], goEnv);
  return { metallb, kubeVip };
}

interface Layer { uncompressed: number; gzip: number; zstd: number; what: string }
interface Measured { name: string; layers: Layer[]; manifestAndConfig: number; docker: number; oci: number; dockerGzip: number; dockerZstd: number }

const size = (p: string) => statSync(p).size;
const compressed = (file: string, cmd: string[]) => Number(run(['sh', '-c', `${cmd.join(' ')} < "$1" | wc -c`, 'sh', file]).trim());

/** An OCI layout's (one image) manifest: its layers' blobs and the manifest + config bytes. */
function ociImage(dir: string): { layers: { path: string; size: number }[]; manifestAndConfig: number } {
  const blob = (digest: string) => join(dir, 'blobs', digest.replace(':', '/'));
  let desc = (JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as { manifests: { digest: string; size: number }[] }).manifests[0]!;
  let doc = JSON.parse(readFileSync(blob(desc.digest), 'utf8')) as { manifests?: { digest: string; size: number; platform?: { architecture: string } }[]; layers?: { digest: string; size: number }[]; config?: { size: number } };
  if (doc.manifests) {
    desc = doc.manifests.find((m) => m.platform?.architecture === 'amd64')!;
    doc = JSON.parse(readFileSync(blob(desc.digest), 'utf8'));
  }
  return { layers: doc.layers!.map((l) => ({ path: blob(l.digest), size: l.size })), manifestAndConfig: desc.size + doc.config!.size };
}

const dir = tempDir('edge-ccm-image-size-');
const podman = Podman.in(dir);
const rows: Measured[] = [];
try {
  const bins = anchorBinaries();
  const ctx = (name: string) => {
    const d = join(dir, `ctx-${name}`);
    mkdirSync(d, { recursive: true });
    return d;
  };
  // MetalLB: speaker/Dockerfile's final stage, FROM scratch in place of distroless/static.
  const mctx = ctx('metallb');
  for (const f of ['cp-tool', 'speaker', 'frr-metrics']) copyFileSync(join(bins.metallb, f), join(mctx, f));
  copyFileSync(join(SRC.metallb, 'frr-tools/reloader/frr-reloader.sh'), join(mctx, 'frr-reloader.sh'));
  copyFileSync(join(SRC.metallb, 'LICENSE'), join(mctx, 'LICENSE'));
  writeFileSync(join(mctx, 'Containerfile'), 'FROM scratch\nCOPY cp-tool /cp-tool\nCOPY speaker /speaker\nCOPY frr-metrics /frr-metrics\nCOPY frr-reloader.sh /frr-reloader.sh\nCOPY LICENSE /\nENTRYPOINT ["/speaker"]\n');
  // kube-vip: its Dockerfile's final stage (FROM scratch already).
  const kctx = ctx('kube-vip');
  copyFileSync('/etc/ssl/certs/ca-certificates.crt', join(kctx, 'ca-certificates.crt'));
  copyFileSync(join(bins.kubeVip, 'kube-vip'), join(kctx, 'kube-vip'));
  writeFileSync(join(kctx, 'Containerfile'), 'FROM scratch\nCOPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\nCOPY kube-vip /\nENTRYPOINT ["/kube-vip"]\n');
  for (const [tag, c] of [['localhost/metallb-speaker:scratch', mctx], ['localhost/kube-vip:scratch', kctx]] as const) {
    await podman.ok(['build', '--quiet', '--runtime', '/usr/sbin/runc', '--platform', 'linux/amd64', '-t', tag, '-f', join(c, 'Containerfile'), c]);
  }
  await podman.ok(['pull', '--quiet', '--arch', 'amd64', `oci-archive:${ARCHIVE}`]);
  const edgeTag = (await podman.ok(['images', '--format', '{{.Repository}}:{{.Tag}}'])).split('\n').find((t) => !t.includes('scratch'))!;

  for (const [name, tag] of [['edge-ccm', edgeTag], ['MetalLB speaker v0.15.2 (distroless/static left out)', 'localhost/metallb-speaker:scratch'], ['kube-vip (FROM scratch)', 'localhost/kube-vip:scratch']] as const) {
    const slug = tag.replace(/[^a-z0-9]+/gi, '-');
    const docker = join(dir, `${slug}.docker.tar`);
    const oci = join(dir, `${slug}.oci.tar`);
    await podman.ok(['save', '--format', 'docker-archive', '-o', docker, tag]);
    await podman.ok(['save', '--format', 'oci-archive', '-o', oci, tag]);
    // As a registry push stores it: the layers compressed, gzip and zstd.
    const pushed: Record<'gzip' | 'zstd', ReturnType<typeof ociImage>> = {} as never;
    for (const format of ['gzip', 'zstd'] as const) {
      const layout = join(dir, `${slug}.${format}`);
      await podman.ok(['push', '--quiet', '--compression-format', format, tag, `oci:${layout}`]);
      pushed[format] = ociImage(layout);
    }
    // The docker-archive holds each layer as its plain tar (podman's oci-archive gzips them).
    const unpacked = join(dir, `${slug}.unpacked`);
    mkdirSync(unpacked);
    run(['tar', '-xf', docker, '-C', unpacked]);
    const rawLayers = (JSON.parse(readFileSync(join(unpacked, 'manifest.json'), 'utf8')) as { Layers: string[] }[])[0]!.Layers.map((l) => join(unpacked, l));
    rows.push({
      name,
      layers: rawLayers.map((path, i) => ({
        uncompressed: size(path), gzip: pushed.gzip.layers[i]!.size, zstd: pushed.zstd.layers[i]!.size,
        what: run(['tar', '-tf', path]).split('\n').filter((f) => f && !f.endsWith('/')).slice(0, 3).join(' ') || '(directories)',
      })),
      manifestAndConfig: pushed.gzip.manifestAndConfig,
      docker: size(docker), oci: size(oci),
      dockerGzip: compressed(docker, ['gzip', '-6']), dockerZstd: compressed(docker, ['zstd', '-3', '-T1']),
    });
    rmSync(unpacked, { recursive: true, force: true });
  }
  const n = (x: number) => x.toLocaleString('en-US');
  const sum = (ls: Layer[], k: 'uncompressed' | 'gzip' | 'zstd') => ls.reduce((a, l) => a + l[k], 0);
  console.log('| image | layers uncompressed (bytes) | pulled, gzip layers (podman push default) | pulled, zstd layers | `podman save` docker-archive | its gzip -6 | its zstd -3 | `podman save` oci-archive (gzip layers) |\n|---|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.name} | ${n(sum(r.layers, 'uncompressed'))} | ${n(sum(r.layers, 'gzip') + r.manifestAndConfig)} | ${n(sum(r.layers, 'zstd') + r.manifestAndConfig)} | ${n(r.docker)} | ${n(r.dockerGzip)} | ${n(r.dockerZstd)} | ${n(r.oci)} |`);
  console.log('\n| image | layer | uncompressed | gzip | zstd |\n|---|---|---|---|---|');
  for (const r of rows) r.layers.forEach((l, i) => console.log(`| ${r.name} | ${i + 1}: ${l.what} | ${n(l.uncompressed)} | ${n(l.gzip)} | ${n(l.zstd)} |`));
} finally {
  await podman.run(['rmi', '--force', '--all']);
  rmSync(dir, { recursive: true, force: true });
}
