import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test';
import { chmodSync, chownSync, copyFileSync, mkdirSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { V1Container, V1Deployment, V1Node } from '@kubernetes/client-node';
import { NODES, ResourceClient } from '../../src/kube/resources.ts';
import type { BunKubeTransport } from '../../src/kube/transport.ts';
import { settledAuditLog } from '../harness/audit.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { removeOwnedDir } from '../harness/processes.ts';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { applyManifests, parseManifests } from '../harness/manifests.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';
import { kubeletArgs } from '../harness/container-args.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';

/**
 * The scratch image (deploy/container/Dockerfile), proven without a Docker engine: the files its
 * COPY lines name are laid out in an empty root, and the binary runs there as the image's UID in
 * new mount and PID namespaces (/proc mounted, nothing else) against a real API server. Run once
 * as `docker run` would (a kubeconfig), once as the Deployment's pod would (its args, a
 * service-account token under rbac.yaml, KUBERNETES_SERVICE_HOST); both initialise a node.
 */
const ROOT = resolve(import.meta.dir, '../..');
const DOCKERFILE = join(ROOT, 'deploy/container/Dockerfile');
// What Docker puts in a scratch container's environment.
const CONTAINER_PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

interface ImageFile {
  source: string; // on this machine
  target: string; // in the image
  mode?: number;
}

interface Stage {
  name?: string;
  from: string;
  files: ImageFile[];
  user?: string;
  entrypoint?: string[];
}

/** Replaces ${NAME} and $NAME; a name not in scope is an error (Docker would leave it empty). */
function expand(word: string, vars: Map<string, string>, line: string): string {
  return word.replace(/\$\{(\w+)\}|\$(\w+)/g, (_m, a: string | undefined, b: string | undefined) => {
    const name = (a ?? b) as string;
    const value = vars.get(name);
    if (value === undefined) throw new Error(`\$${name} is not declared (ARG) where it is used: ${line}`);
    return value;
  });
}

/**
 * The image the Dockerfile builds for one platform, as BuildKit would: ARGs before the first
 * FROM are global (usable in FROM lines; TARGETARCH set to `arch`), a stage sees only the ARGs it
 * declares, and `FROM STAGE` starts from that stage's files. `COPY --from=STAGE SRC DST` takes
 * SRC from this machine, which runs the same Debian release as that stage; a plain COPY takes it
 * from the repository (the build context). One source per COPY, files only: anything else is
 * refused, and a scratch stage may only COPY.
 */
function imageFor(text: string, arch: 'amd64' | 'arm64'): Stage {
  const lines = text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const globals = new Map<string, string>();
  const stages: Stage[] = [];
  let stage: Stage | undefined;
  let scope = new Map<string, string>();
  for (const line of lines) {
    const [instruction = '', ...rest] = line.split(/\s+/);
    switch (instruction.toUpperCase()) {
      case 'ARG': {
        const [name = '', value] = (rest[0] ?? '').split('=') as [string, string | undefined];
        const resolved = name === 'TARGETARCH' ? arch : value ?? globals.get(name) ?? '';
        (stage ? scope : globals).set(name, resolved);
        break;
      }
      case 'FROM': {
        const from = expand(rest[0] ?? '', globals, line);
        const name = rest[1]?.toUpperCase() === 'AS' ? rest[2] : undefined;
        const base = stages.find((s) => s.name === from);
        stage = { name, from: base ? base.from : from, files: [...(base?.files ?? [])], user: base?.user, entrypoint: base?.entrypoint };
        stages.push(stage);
        scope = new Map();
        break;
      }
      case 'COPY': {
        const words = rest.map((w) => expand(w, scope, line));
        const options = words.filter((w) => w.startsWith('--'));
        const paths = words.filter((w) => !w.startsWith('--'));
        if (paths.length !== 2) throw new Error(`COPY with one source and one target only: ${line}`);
        const from = options.find((o) => o.startsWith('--from='));
        const chmod = options.find((o) => o.startsWith('--chmod='));
        const [source, target] = paths as [string, string];
        stage?.files.push({
          source: from ? source : join(ROOT, source),
          target,
          ...(chmod ? { mode: parseInt(chmod.slice('--chmod='.length), 8) } : {}),
        });
        break;
      }
      case 'ADD':
      case 'RUN':
        if (stage?.from === 'scratch') throw new Error(`the scratch stage may only COPY: ${line}`);
        break;
      case 'USER':
        if (stage) stage.user = rest[0];
        break;
      case 'ENTRYPOINT':
        if (stage) stage.entrypoint = JSON.parse(rest.join(' ')) as string[];
        break;
    }
  }
  if (!stage) throw new Error('Dockerfile has no FROM');
  return stage;
}

const dockerfileText = readFileSync(DOCKERFILE, 'utf8');
// This machine runs the amd64 image; the arm64 one is checked against its binary's ELF headers.
const image = imageFor(dockerfileText, 'amd64');
const binary = image.files.find((f) => f.target === image.entrypoint?.[0]);

/** An empty root holding exactly the image's files, as the image's layers would unpack. */
function layOutImage(root: string): void {
  mkdirSync(root, { mode: 0o755 });
  chmodSync(root, 0o755); // mkdtemp-style 0700 would lock the non-root UID out
  for (const file of image.files) {
    const target = join(root, file.target);
    mkdirSync(dirname(target), { recursive: true, mode: 0o755 });
    copyFileSync(file.source, target); // follows symlinks, as COPY does for its source
    chmodSync(target, file.mode ?? statSync(file.source).mode & 0o7777);
  }
  mkdirSync(join(root, 'proc'), { mode: 0o555 }); // the runtime's mount point
}

/** A file the container gets at run time (a mounted secret or ConfigMap), readable by its UID only. */
function mountFile(root: string, path: string, content: string, uid: number): void {
  const target = join(root, path);
  mkdirSync(dirname(target), { recursive: true, mode: 0o755 });
  writeFileSync(target, content, { mode: 0o600 });
  chownSync(target, uid, uid);
}

function smallInventory(machines: string[]): string {
  return [
    'inventory:',
    '  defaults: { region: scratch-region, instanceType: scratch-metal }',
    '  machines:',
    ...machines.map((id, i) => `    - { id: ${id}, addresses: [{ type: InternalIP, address: 10.9.0.${i + 1} }] }`),
    '',
  ].join('\n');
}

/** A process started by `unshare` as seen from here, and the image's PID 1 inside it. */
interface Container {
  process: CcmProcess;
  pid: number;
  pidFile?: string; // for the dir's watchdog; removed once the process is gone
}

let cp: ControlPlane;
let admin: BunKubeTransport;
let nodes: ResourceClient<V1Node>;
let running: Container | undefined;
const dirs: string[] = [];

beforeAll(async () => {
  for (const tool of ['unshare', 'chroot', 'env', 'ldd']) {
    if (!Bun.which(tool)) throw new Error(`${tool} is missing: run scripts/install-test-deps.sh (Debian util-linux, coreutils, libc-bin)`);
  }
  if (!binary) throw new Error(`the Dockerfile's ENTRYPOINT ${image.entrypoint} is not a file it copies`);
  if (!statSync(binary.source, { throwIfNoEntry: false })) throw new Error(`${binary.source} is missing: build it first (bun run build)`);
  cp = await startControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  nodes = new ResourceClient<V1Node>(admin, NODES);
}, 240_000);

afterEach(async () => {
  if (running) await stopContainer(running, 'SIGKILL');
  for (const dir of dirs.splice(0)) removeOwnedDir(dir);
});

afterAll(async () => {
  await cp?.stop();
});

/**
 * `unshare --mount --pid --fork --mount-proc` then `chroot --userspec`: the image's files as
 * the root, /proc of its own PID namespace, a container's environment and nothing else. Its
 * pid (as seen from here) goes in `dir`, whose watchdog kills it if this test process dies.
 */
async function runContainer(dir: string, root: string, user: string, env: string[], args: string[]): Promise<Container> {
  const cmd = [
    '--mount', '--pid', '--fork', `--mount-proc=${join(root, 'proc')}`,
    'env', '-i', CONTAINER_PATH, ...env,
    Bun.which('chroot') as string, `--userspec=${user}`, root,
    ...(image.entrypoint ?? []), ...args,
  ];
  const unshare = CcmProcess.binary(cmd, {}, Bun.which('unshare') as string);
  running = { process: unshare, pid: -1 }; // stopped by afterEach even if it never gets further
  const exited = () => {
    if (unshare.proc.exitCode !== null) throw new Error(`container exited (${unshare.proc.exitCode}):\n${unshare.logs()}`);
  };
  // unshare forks once; the child execs env, chroot and the binary, keeping its pid.
  const pid = await eventually('the container process', () => (exited(), childOf(unshare.pid)), 30_000);
  const pidFile = join(dir, 'container.pid');
  writeFileSync(pidFile, String(pid));
  const container = { process: unshare, pid, pidFile };
  running = container;
  await eventually('the binary running in the image root', () => {
    exited();
    return readlinkSync(`/proc/${pid}/exe`, { encoding: 'utf8' }).endsWith(binary?.target ?? '?');
  }, 30_000);
  return container;
}

function childOf(parent: number): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Fields after the parenthesised command name: state, ppid, ...
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/** SIGTERM (or SIGKILL) to the container's PID 1 itself; unshare exits with its status. */
async function stopContainer(container: Container, signal: NodeJS.Signals): Promise<number> {
  if (running === container) running = undefined;
  try {
    if (container.process.proc.exitCode !== null) return await container.process.exited();
    const pid = container.pid >= 0 ? container.pid : childOf(container.process.pid);
    if (pid === undefined) return await container.process.stop('SIGKILL');
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
    // A bound, not a wait: the exit ends it; a container still running after a minute is killed.
    const exit = await Promise.race([container.process.exited(), Bun.sleep(60_000).then(() => undefined)]);
    return exit ?? (await container.process.stop('SIGKILL'));
  } finally {
    // Once it has exited its pid may be reused: the watchdog must not kill it any more.
    if (container.pidFile) rmSync(container.pidFile, { force: true });
  }
}

function procStatus(pid: number): Record<string, string> {
  return Object.fromEntries(readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').filter(Boolean).map((l) => {
    const i = l.indexOf(':');
    return [l.slice(0, i), l.slice(i + 1).trim()];
  }));
}

async function registerUninitializedNode(name: string): Promise<void> {
  await nodes.create({ metadata: { name }, spec: { taints: [UNINITIALIZED] } });
}

async function waitForInitialised(name: string, container: Container): Promise<V1Node> {
  return eventually(`node ${name} initialised by the static provider`, async () => {
    if (container.process.proc.exitCode !== null) throw new Error(`container exited (${container.process.proc.exitCode}):\n${container.process.logs()}`);
    const node = await nodes.get(name);
    return node.spec?.providerID && !node.spec.taints?.some((t) => t.key === UNINITIALIZED.key) ? node : undefined;
  }, 90_000);
}

test('the image holds the binary and exactly the libraries it is linked against, and runs as non-root', () => {
  const ldd = Bun.spawnSync(['ldd', binary?.source ?? '']);
  expect(ldd.exitCode).toBe(0);
  // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and the loader "/lib64/ld-linux-x86-64.so.2 (0x...)".
  const needed = ldd.stdout.toString().split('\n')
    .map((l) => /=>\s*(\/\S+)/.exec(l)?.[1] ?? /^\s*(\/\S+)/.exec(l)?.[1])
    .filter((p): p is string => !!p);
  expect(needed.length).toBeGreaterThanOrEqual(2);
  const libraries = image.files.filter((f) => f !== binary);
  expect(libraries.map((f) => f.source).sort()).toEqual(needed.sort());
  for (const lib of libraries) expect(lib.target).toBe(lib.source); // where the loader looks for it
  expect(image.from).toBe('scratch');
  expect(binary?.source).toBe(join(ROOT, 'dist/edge-ccm-linux-amd64'));
  expect(image.user).toBe('65532:65532');
});

test('every image the Dockerfile pulls is pinned by digest (a re-tagged base cannot change the libraries)', () => {
  const froms = dockerfileText.split('\n').map((l) => /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(l.trim())).filter((m) => m !== null);
  const stageNames = new Set(froms.map((m) => m[2]).filter(Boolean));
  // A base named by a global ARG (GLIBC_IMAGE, which a build without a registry overrides) is
  // pinned by its default.
  const globalArgs = new Map([...dockerfileText.split(/^FROM /m)[0]!.matchAll(/^ARG (\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
  const pulled = froms.map((m) => (m[1] as string).replace(/^\$\{(\w+)\}$/, (whole, name: string) => globalArgs.get(name) ?? whole))
    .filter((ref) => ref !== 'scratch' && !stageNames.has(ref) && !ref.startsWith('runtime-$'));
  expect(pulled.length).toBeGreaterThan(0);
  for (const ref of pulled) expect(ref).toMatch(/^[\w./:-]+@sha256:[0-9a-f]{64}$/);
  // The libraries' release is the one the binary is tested on (glibc 2.36).
  expect(pulled).toContainEqual(expect.stringMatching(/^debian:bookworm-slim@/));
});

/** readelf's view of a binary: its ELF machine, program interpreter and needed libraries. */
function elfLinkage(path: string): { machine: string; interpreter: string; needed: string[] } {
  const out = (args: string[]) => {
    const r = Bun.spawnSync(['readelf', ...args, path]);
    if (r.exitCode !== 0) throw new Error(`readelf ${args.join(' ')} ${path}: ${r.stderr.toString()}`);
    return r.stdout.toString();
  };
  return {
    machine: /Machine:\s*(.+)/.exec(out(['-hW']))?.[1]?.trim() ?? '',
    interpreter: /program interpreter: ([^\]]+)\]/.exec(out(['-lW']))?.[1] ?? '',
    needed: [...out(['-dW']).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1] as string),
  };
}

test('the arm64 image holds the arm64 binary, its ELF interpreter and every library it needs, where the loader looks', () => {
  if (!Bun.which('readelf')) throw new Error('readelf is missing: run scripts/install-test-deps.sh (Debian binutils)');
  const arm = imageFor(dockerfileText, 'arm64');
  const armBinary = arm.files.find((f) => f.target === arm.entrypoint?.[0]);
  expect(armBinary?.source).toBe(join(ROOT, 'dist/edge-ccm-linux-arm64'));
  expect(armBinary?.mode).toBe(0o555);
  const elf = elfLinkage(armBinary!.source);
  expect(elf.machine).toBe('AArch64');
  const libraries = arm.files.filter((f) => f !== armBinary);
  for (const lib of libraries) expect(lib.target).toBe(lib.source); // the Debian arm64 path, as in the glibc stage
  const targets = libraries.map((f) => f.target).sort();
  // The loader at the path the binary names, and every other needed library in the arm64
  // multiarch directory of Debian's ld.so search path (the loader satisfies its own soname).
  const loaderName = elf.interpreter.split('/').at(-1);
  const expected = [elf.interpreter, ...elf.needed.filter((n) => n !== loaderName).map((n) => `/lib/aarch64-linux-gnu/${n}`)].sort();
  expect(targets).toEqual(expected);
  expect({ from: arm.from, user: arm.user }).toEqual({ from: 'scratch', user: image.user });
  // And the amd64 image is built from the same file with the same user and entrypoint.
  expect(arm.entrypoint).toEqual(image.entrypoint);
});

test('in an empty root with only the image files, as UID 65532, with a kubeconfig: the binary initialises a node', async () => {
  const dir = tempDir('edge-ccm-scratch-');
  dirs.push(dir);
  const root = join(dir, 'root');
  layOutImage(root);
  const uid = Number(image.user?.split(':')[0]);
  // As `docker run -v ...`: a kubeconfig and the inventory mounted for the image's UID. The kubeconfig
  // names the API server by host name, resolved through the /etc/hosts every runtime mounts.
  // (Not "localhost", which Bun resolves without asking; the serving certificate has this name.)
  const apiHost = 'kubernetes.default.svc';
  const kubeconfig = readFileSync(cp.adminKubeconfig, 'utf8').replace(cp.server, cp.server.replace('127.0.0.1', apiHost));
  expect(kubeconfig).toContain(`https://${apiHost}:`);
  mountFile(root, '/etc/edge-ccm/kubeconfig', kubeconfig, uid);
  mountFile(root, '/etc/hosts', `127.0.0.1 ${apiHost}\n`, uid);
  mountFile(root, '/etc/edge-ccm/cloud-config.yaml', smallInventory(['scratch-a']), uid);
  const [port] = await freeLoopbackPorts(1);

  const container = await runContainer(dir, root, image.user ?? '', ['HOSTNAME=scratch-container'], [
    '--cloud-provider=static', '--cloud-config=/etc/edge-ccm/cloud-config.yaml', '--kubeconfig=/etc/edge-ccm/kubeconfig',
    '--bind-address=127.0.0.1', `--secure-port=${port}`,
  ]);
  const status = procStatus(container.pid);
  expect(status.Uid?.split(/\s+/)).toEqual([String(uid), String(uid), String(uid), String(uid)]);
  expect(status.NSpid?.split(/\s+/).at(-1)).toBe('1'); // PID 1 of its own namespace, as in a container
  expect(readlinkSync(`/proc/${container.pid}/root`)).toBe(root);
  await container.process.waitForLog('successfully acquired lease', 60_000);

  await registerUninitializedNode('scratch-a');
  const node = await waitForInitialised('scratch-a', container);
  expect(node.spec?.providerID).toBe('static://scratch-a');
  expect(node.metadata?.labels?.['node.kubernetes.io/instance-type']).toBe('scratch-metal');
  expect(node.metadata?.labels?.['topology.kubernetes.io/region']).toBe('scratch-region');
  const livez = await fetch(`https://127.0.0.1:${port}/livez`, { tls: { rejectUnauthorized: false } });
  expect(livez.status).toBe(200);

  const idle = procStatus(container.pid);
  console.log(`edge-ccm in the scratch root: binary ${(statSync(binary?.source ?? '').size / 1024 / 1024).toFixed(1)} MiB, ` +
    `VmRSS ${idle.VmRSS}, VmHWM ${idle.VmHWM} after initialising a node`);

  // PID 1 handles SIGTERM: in-flight work drains, the lease is released, exit 0.
  expect(await stopContainer(container, 'SIGTERM')).toBe(0);
}, 180_000);

test("as the Deployment's pod: its args, user and mounts, a service-account token under rbac.yaml, in-cluster config", async () => {
  const manifests = ['rbac.yaml', 'deployment.yaml'].map((f) => readFileSync(join(ROOT, 'deploy/kubernetes', f), 'utf8'));
  await applyManifests(admin, manifests[0] as string);
  const deployment = parseManifests(manifests[1] as string).find((o) => o.kind === 'Deployment') as unknown as V1Deployment;
  const pod = deployment.spec?.template.spec;
  const container = pod?.containers[0] as V1Container;
  const uid = container.securityContext?.runAsUser ?? pod?.securityContext?.runAsUser;
  const gid = container.securityContext?.runAsGroup ?? pod?.securityContext?.runAsGroup;
  expect(`${uid}:${gid}`).toBe(image.user as string); // the image and the pod agree on the user

  const dir = tempDir('edge-ccm-scratch-pod-');
  dirs.push(dir);
  const root = join(dir, 'root');
  layOutImage(root);
  // What the kubelet mounts: the service-account token, CA and namespace, and the ConfigMap volume.
  const token = await cp.serviceAccountToken('kube-system', pod?.serviceAccountName ?? '');
  const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';
  mountFile(root, `${serviceAccountDir}/token`, token, uid as number);
  mountFile(root, `${serviceAccountDir}/ca.crt`, cp.caPem, uid as number);
  mountFile(root, `${serviceAccountDir}/namespace`, 'kube-system', uid as number);
  const cloudConfigArg = container.args?.find((a) => a.startsWith('--cloud-config='))?.slice('--cloud-config='.length) ?? '';
  const mount = container.volumeMounts?.find((m) => cloudConfigArg.startsWith(`${m.mountPath}/`));
  expect(mount?.readOnly).toBe(true);
  mountFile(root, cloudConfigArg, smallInventory(['scratch-b']), uid as number);

  // The one change: a free port instead of 10258 (the last --secure-port wins, as with pflag).
  // The host-network pod's IP, which --bind-address=$(POD_IP) binds: loopback here.
  const podIp = '127.0.0.1';
  const [port] = await freeLoopbackPorts(1);
  const apiPort = new URL(cp.server).port;
  const ccm = await runContainer(dir, root, `${uid}:${gid}`, [
    'HOSTNAME=edge-ccm-7d9f-abcde', 'KUBERNETES_SERVICE_HOST=127.0.0.1', `KUBERNETES_SERVICE_PORT=${apiPort}`,
  ], [...kubeletArgs(container, { 'status.podIP': podIp }), `--secure-port=${port}`]);
  await ccm.process.waitForLog('successfully acquired lease', 60_000);

  // The kubelet's probes, as the Deployment states them (but on the test's port).
  for (const probe of [container.livenessProbe, container.readinessProbe]) {
    const get = probe?.httpGet;
    const url = `${get?.scheme?.toLowerCase()}://${get?.host ?? podIp}:${port}${get?.path}`;
    await eventually(`probe ${url}`, async () => (await fetch(url, { tls: { rejectUnauthorized: false } })).status === 200, 60_000);
  }

  await registerUninitializedNode('scratch-b');
  const node = await waitForInitialised('scratch-b', ccm);
  expect(node.spec?.providerID).toBe('static://scratch-b');

  expect(await stopContainer(ccm, 'SIGTERM')).toBe(0);
  // The service account made every request of that run and was never refused.
  const audit = await settledAuditLog(cp.auditLogPath);
  const ours = audit.filter((e) => e.user?.username === `system:serviceaccount:kube-system:${pod?.serviceAccountName}`);
  expect(ours.length).toBeGreaterThan(0);
  expect(ours.filter((e) => e.responseStatus?.code === 403).map((e) => `${e.verb} ${e.requestURI}`)).toEqual([]);
}, 180_000);
