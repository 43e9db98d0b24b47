import { afterAll, beforeAll, expect, test } from 'bun:test';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { LEASES, NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { Lease } from '../../src/kube/leader-election.ts';
import { tempDir } from '../harness/ccm-process.ts';
import { type ControlPlane, sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';
import { INSTALL_HINT, Podman } from '../harness/podman.ts';
import { removeOwnedDir } from '../harness/processes.ts';

/**
 * The image as users get it: scripts/build-image.sh builds deploy/container/Dockerfile with podman
 * for linux/amd64 and linux/arm64 into one OCI archive (the glibc stage from Debian's libc6, as no
 * registry is reachable here); the amd64 image from that archive runs under podman (runc, host
 * network, the kubeconfig and inventory mounted, read-only root) against the real API server and
 * initialises a node and gives a service an address; the arm64 image's files run under
 * qemu-user-static as a container would run them.
 */
const ROOT = resolve(import.meta.dir, '../..');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const UID = 65532;
const PREFIX = `podman-${process.pid}`;

interface Descriptor { mediaType: string; digest: string; size: number; platform?: { architecture: string; os: string }; annotations?: Record<string, string> }
interface ImageConfig { architecture: string; os: string; config: { User?: string; Entrypoint?: string[]; Labels?: Record<string, string>; ExposedPorts?: Record<string, unknown> }; rootfs: { diff_ids: string[] } }

let cp: ControlPlane;
let dir: string;
let archive: string;
let oci: string;
let podman: Podman;

function blob(digest: string): Buffer {
  return readFileSync(join(oci, 'blobs', ...digest.split(':')));
}
const json = <T>(digest: string) => JSON.parse(blob(digest).toString()) as T;

/** The image manifests of the archive's index, by architecture. */
function platformImages(): Map<string, { manifest: { config: Descriptor; layers: Descriptor[] }; config: ImageConfig }> {
  const top = JSON.parse(readFileSync(join(oci, 'index.json'), 'utf8')) as { manifests: Descriptor[] };
  const list = top.manifests.find((m) => m.mediaType === 'application/vnd.oci.image.index.v1+json');
  if (!list) throw new Error(`no image index in ${archive}: ${JSON.stringify(top)}`);
  const index = json<{ manifests: Descriptor[] }>(list.digest);
  return new Map(index.manifests.map((m) => {
    const manifest = json<{ config: Descriptor; layers: Descriptor[] }>(m.digest);
    return [m.platform?.architecture ?? '?', { manifest, config: json<ImageConfig>(manifest.config.digest) }];
  }));
}

beforeAll(async () => {
  for (const tool of ['podman', 'mmdebstrap', 'tar', 'unshare', 'chroot', 'qemu-aarch64-static']) {
    if (!Bun.which(tool)) throw new Error(`${tool} is missing: ${INSTALL_HINT}`);
  }
  for (const arch of ['amd64', 'arm64']) {
    if (!existsSync(join(ROOT, `dist/edge-ccm-linux-${arch}`))) throw new Error(`dist/edge-ccm-linux-${arch} is missing: run \`bun run build\` first`);
  }
  dir = tempDir('edge-ccm-podman-');
  podman = Podman.in(dir);
  archive = join(dir, `edge-ccm-${VERSION}.oci.tar`);
  // Its podman work dir goes in the owned dir too (TMPDIR), so nothing outlives a killed run.
  const build = Bun.spawn(['bash', join(ROOT, 'scripts/build-image.sh'), '--local-base', archive], {
    cwd: ROOT, env: { ...process.env, TMPDIR: dir }, stdout: 'pipe', stderr: 'pipe',
  });
  const [out, err, code] = await Promise.all([new Response(build.stdout).text(), new Response(build.stderr).text(), build.exited]);
  if (code !== 0) throw new Error(`scripts/build-image.sh exited ${code}:\n${err}${out}`);
  expect(out.trim()).toBe(archive);
  oci = join(dir, 'oci');
  mkdirSync(oci);
  const untar = Bun.spawnSync(['tar', '-xf', archive, '-C', oci]);
  if (untar.exitCode !== 0) throw new Error(`tar: ${untar.stderr.toString()}`);
  cp = await sharedControlPlane();
}, 600_000);

afterAll(async () => {
  try {
    // Everything in this podman's own store is this test's: the container, then every image.
    const images = podman ? (await podman.ok(['images', '--quiet', '--all'])).split('\n').filter(Boolean) : [];
    await podman?.remove([`${PREFIX}-ccm`], images);
  } finally {
    if (dir) removeOwnedDir(dir);
  }
}, 120_000);

test('scripts/build-image.sh: one OCI archive, an index with linux/amd64 and linux/arm64, labelled, non-root, the right binary in each', () => {
  const images = platformImages();
  expect([...images.keys()].sort()).toEqual(['amd64', 'arm64']);
  // The commit built from: HEAD then, which others may have moved on since (so: an ancestor of HEAD).
  const isBuiltCommit = (rev: string | undefined) => /^[0-9a-f]{40}$/.test(rev ?? '') &&
    Bun.spawnSync(['git', '-C', ROOT, 'merge-base', '--is-ancestor', rev ?? '', 'HEAD']).exitCode === 0;
  for (const [arch, { config }] of images) {
    expect(config.architecture).toBe(arch);
    expect(config.os).toBe('linux');
    expect(config.config.User).toBe(`${UID}:${UID}`);
    expect(config.config.Entrypoint).toEqual(['/edge-ccm']);
    expect(Object.keys(config.config.ExposedPorts ?? {})).toEqual(['10258/tcp']);
    expect(config.config.Labels).toMatchObject({
      'org.opencontainers.image.version': VERSION,
      'org.opencontainers.image.licenses': 'Apache-2.0',
      'org.opencontainers.image.title': 'edge-ccm',
    });
    expect(config.config.Labels?.['org.opencontainers.image.source']).toBeTruthy();
    expect(isBuiltCommit(config.config.Labels?.['org.opencontainers.image.revision'])).toBe(true);
  }
});

/** The files of an image's layers unpacked into `root`, in order (no whiteouts: the build only adds files). */
function unpack(layers: Descriptor[], root: string): void {
  mkdirSync(root, { recursive: true, mode: 0o755 });
  for (const layer of layers) {
    const r = Bun.spawnSync(['tar', '-xzf', join(oci, 'blobs', ...layer.digest.split(':')), '-C', root]);
    if (r.exitCode !== 0) throw new Error(`unpacking ${layer.digest}: ${r.stderr.toString()}`);
  }
}

test('the arm64 image: its files run under qemu-aarch64-static, chrooted as UID 65532 (--version, validate)', async () => {
  const arm = platformImages().get('arm64')!;
  const root = join(dir, 'arm64-root');
  unpack(arm.manifest.layers, root);
  // The emulator inside the root, as binfmt_misc's F flag would hand it to the kernel.
  copyFileSync(Bun.which('qemu-aarch64-static')!, join(root, 'qemu-aarch64-static'));
  writeFileSync(join(root, 'inventory.yaml'), 'inventory:\n  machines:\n    - { id: arm-a, addresses: [{ type: InternalIP, address: 10.8.0.1 }] }\n');
  // /proc of its own, as every runtime mounts: the binary reads its own file through /proc/self/exe.
  mkdirSync(join(root, 'proc'), { mode: 0o555 });
  const run = async (args: string[]) => {
    const proc = Bun.spawn(['unshare', '--mount', '--pid', '--fork', `--mount-proc=${join(root, 'proc')}`,
      'chroot', `--userspec=${UID}:${UID}`, root, '/qemu-aarch64-static', '/edge-ccm', ...args], { stdout: 'pipe', stderr: 'pipe' });
    // SIGKILL to unshare ends its PID namespace, the emulated binary with it.
    const timer = setTimeout(() => proc.kill('SIGKILL'), 180_000);
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    clearTimeout(timer);
    return { code, out: out + err };
  };
  const version = await run(['--version']);
  expect(version).toMatchObject({ code: 0 });
  expect(version.out).toStartWith(`edge-ccm ${VERSION} `);
  const validate = await run(['validate', '--cloud-provider', 'static', '--cloud-config', '/inventory.yaml']);
  expect(validate).toMatchObject({ code: 0 });
  const invalid = await run(['validate', '--cloud-provider', 'static', '--cloud-config', '/edge-ccm']);
  expect(invalid.code).toBe(2);
}, 600_000);

test('the amd64 image under podman (runc, host network): a node initialised, a service given an address; non-root, read-only root, small', async () => {
  const loaded = await podman.ok(['pull', '--quiet', `oci-archive:${archive}`]);
  const image = loaded.split('\n').at(-1)!;
  const info = JSON.parse(await podman.ok(['image', 'inspect', image])) as { Architecture: string; Size: number; Labels: Record<string, string> }[];
  expect(info[0]?.Architecture).toBe('amd64');
  const binarySize = Bun.file(join(ROOT, 'dist/edge-ccm-linux-amd64')).size;
  // The binary plus glibc's loader and four libraries (about 3 MB), nothing else.
  const extra = (info[0]?.Size ?? 0) - binarySize;
  console.log(`podman image: ${((info[0]?.Size ?? 0) / 1024 / 1024).toFixed(1)} MiB, of which ${(extra / 1024 / 1024).toFixed(1)} MiB besides the binary`);
  expect(extra).toBeGreaterThan(0);
  expect(extra).toBeLessThan(5 * 1024 * 1024);

  // Mounted as `podman run -v` would for a user: the kubeconfig names the API server by a host
  // name from the container's /etc/hosts (--add-host), the inventory has one machine and a pool.
  const lease = `${PREFIX}-lease`;
  const node = `${PREFIX}-node`;
  const files = join(dir, 'mounts');
  mkdirSync(files, { mode: 0o755 });
  const apiHost = 'kubernetes.default.svc';
  writeFileSync(join(files, 'kubeconfig'), readFileSync(cp.adminKubeconfig, 'utf8').replace(cp.server, cp.server.replace('127.0.0.1', apiHost)), { mode: 0o644 });
  writeFileSync(join(files, 'cloud-config.yaml'), [
    'inventory:',
    '  defaults: { region: podman-region, instanceType: podman-metal }',
    `  machines:\n    - { id: ${node}, addresses: [{ type: InternalIP, address: 10.8.1.1 }] }`,
    'loadBalancer:',
    // Only this test's service may use the pool: the shared control plane holds other files'
    // LoadBalancer services (some in namespaces still terminating), which would take its addresses.
    `  pools:\n    - { name: podman, addresses: [203.0.113.64/29], serviceSelector: "edge-ccm-test=${PREFIX}" }`,
    '',
  ].join('\n'), { mode: 0o644 });
  const [port] = await freeLoopbackPorts(1);
  const name = `${PREFIX}-ccm`;
  const id = await podman.ok([
    'run', '--detach', '--name', name, ...podman.runFlags(), '--network=host', '--read-only', '--pull=never',
    `--add-host=${apiHost}:127.0.0.1`,
    '-v', `${files}/kubeconfig:/etc/edge-ccm/kubeconfig:ro`, '-v', `${files}/cloud-config.yaml:/etc/edge-ccm/cloud-config.yaml:ro`,
    image,
    '--cloud-provider=static', '--cloud-config=/etc/edge-ccm/cloud-config.yaml', '--kubeconfig=/etc/edge-ccm/kubeconfig',
    '--bind-address=127.0.0.1', `--secure-port=${port}`, `--leader-elect-resource-name=${lease}`, '--leader-elect-retry-period=500ms',
  ]);
  const logs = async () => {
    const r = await podman.run(['logs', name]);
    return r.stdout + r.stderr;
  };
  const running = async () => {
    const state = (await podman.ok(['inspect', '--format', '{{.State.Status}} {{.State.ExitCode}}', name])).split(' ');
    if (state[0] !== 'running') throw new Error(`the container is ${state.join(' ')}:\n${await logs()}`);
  };
  await eventually('the container leading', async () => (await running(), (await logs()).includes('successfully acquired lease')), 90_000);

  // As a container: its process is UID 65532, in the image's root, which is mounted read-only.
  const pid = Number(await podman.ok(['inspect', '--format', '{{.State.Pid}}', id]));
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  expect(/^Uid:\s+(.*)$/m.exec(status)?.[1]?.split(/\s+/)).toEqual([String(UID), String(UID), String(UID), String(UID)]);
  expect(readlinkSync(`/proc/${pid}/exe`)).toBe('/edge-ccm');
  const rootMount = readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n').find((l) => l.split(' ')[4] === '/');
  expect(rootMount?.split(' ')[5]?.split(',')).toContain('ro');

  const admin = transportFor(cp.adminKubeconfig);
  const nodes = new ResourceClient<V1Node>(admin, NODES);
  const services = new ResourceClient<V1Service>(admin, SERVICES);
  await nodes.create({ metadata: { name: node }, spec: { taints: [UNINITIALIZED] } });
  try {
    const initialised = await eventually(`node ${node} initialised`, async () => {
      await running();
      const n = await nodes.get(node);
      return n.spec?.providerID && !n.spec.taints?.some((t) => t.key === UNINITIALIZED.key) ? n : undefined;
    }, 90_000);
    expect(initialised.spec?.providerID).toBe(`static://${node}`);
    expect(initialised.metadata?.labels?.['node.kubernetes.io/instance-type']).toBe('podman-metal');

    await services.create({ metadata: { name: `${PREFIX}-svc`, labels: { 'edge-ccm-test': PREFIX } }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } }, { namespace: 'default' });
    const ip = await eventually('the service given an address', async () => {
      await running();
      return (await services.get(`${PREFIX}-svc`, { namespace: 'default' })).status?.loadBalancer?.ingress?.[0]?.ip;
    }, 90_000).catch(async (e: unknown) => {
      // Say why: the service's conditions and the container's log (a shared control plane holds other files' objects).
      const svc = await services.get(`${PREFIX}-svc`, { namespace: 'default' }).catch(() => undefined);
      console.error(`service status: ${JSON.stringify(svc?.status)}\ncontainer log:\n${await logs()}`);
      throw e;
    });
    expect(ip).toMatch(/^203\.0\.113\.(6[5-9]|70)$/); // the pool's usable addresses

    // `podman stop`: SIGTERM to PID 1, a clean exit and the lease released for the next replica.
    await podman.ok(['stop', '--time', '45', name]);
    expect(await podman.ok(['inspect', '--format', '{{.State.ExitCode}}', name])).toBe('0');
    const held = await new ResourceClient<Lease>(admin, LEASES).get(lease, { namespace: 'kube-system' });
    expect(held.spec?.holderIdentity ?? '').toBe('');
  } finally {
    await services.delete(`${PREFIX}-svc`, { namespace: 'default' }).catch(() => undefined);
    await nodes.delete(node).catch(() => undefined);
  }
}, 300_000);
