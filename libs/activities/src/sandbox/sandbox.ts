import { spawn } from 'node:child_process';
import { existsSync, lstatSync, readlinkSync } from 'node:fs';
import { chown, readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/**
 * Runs an agent's shell command in its workspace, contained.
 *
 * `bwrap` (bubblewrap, Debian's package) gives the command:
 * - no network: a network namespace of its own, with only a loopback nobody listens on;
 * - the workspace as the only writable path, at `/workspace`; `/usr` (and the merged `/bin`, `/lib`,
 *   `/lib64`) and a few `/etc` files programs need, read-only; a fresh `/tmp`, `/proc` and `/dev`;
 *   nothing of the platform's (its tree, `.stack/`, other runs' workspaces, `/root`);
 * - its own pid namespace and session: when the command's shell ends or is killed, every process it
 *   started ends with it, and it dies with the worker (`--die-with-parent`);
 * - an unprivileged uid of its own (per run, when the worker is root; set inside the sandbox, with no
 *   capability left): process limits do not bind root;
 * - resource limits (setrlimit, through `prlimit`): processes, data memory, file size, open files,
 *   no core dumps; wall time and output are watched here;
 * - an environment holding PATH, HOME, LANG and TMPDIR only. It is cleared before bwrap starts, not
 *   only by bwrap: the namespace's pid 1 is bwrap's own process, which keeps the environment it was
 *   started with (readable inside when it runs as the command's uid).
 *
 * `none` runs `sh -c` in the workspace with the same limits, environment and timeout, and contains
 * nothing else: for development on machines without user namespaces, never the default.
 */
export type SandboxKind = 'bwrap' | 'none';

export interface ExecLimits {
  /** Wall time, seconds. */
  timeoutS: number;
  /** Writable data memory (RLIMIT_DATA), bytes. */
  memoryBytes: number;
  /** Processes (and threads) of the sandbox's uid (RLIMIT_NPROC). */
  processes: number;
  /** The largest file it may write (RLIMIT_FSIZE), bytes. */
  fileBytes: number;
  /** Kept of each of stdout and stderr, bytes: the head and the tail, with a marker between. */
  keptOutputBytes: number;
  /** Output of both streams together after which the command is killed, bytes. */
  maxOutputBytes: number;
}

export const DEFAULT_EXEC_LIMITS: ExecLimits = {
  timeoutS: 30,
  memoryBytes: 1024 * 1024 * 1024,
  processes: 128,
  fileBytes: 64 * 1024 * 1024,
  keptOutputBytes: 64 * 1024,
  maxOutputBytes: 16 * 1024 * 1024,
};

/** The most a command may ask for, whatever its `timeout_s` says. */
export const MAX_EXEC_TIMEOUT_S = 600;

export interface ExecResult {
  /** The command's exit code; null when a signal ended it (the timeout's kill, a limit). */
  exit_code: number | null;
  /** The signal that ended it, if one did (SIGKILL for the timeout and the output limit, SIGXFSZ for the file limit). */
  signal: string | null;
  stdout: string;
  stderr: string;
  timed_out: boolean;
  /** It wrote more than `maxOutputBytes` and was killed. */
  output_limited: boolean;
  duration_ms: number;
}

export interface ExecRequest {
  command: string;
  /** The workspace directory on the worker's disk (bound at /workspace). */
  workspace: string;
  /** A key for the sandbox's uid (the run): runs never share a process budget. */
  owner: string;
  limits: ExecLimits;
}

export interface Sandbox {
  readonly kind: SandboxKind;
  run(request: ExecRequest): Promise<ExecResult>;
}

const SANDBOX_ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/workspace', LANG: 'C.UTF-8', TMPDIR: '/tmp' };
/** What prlimit, setpriv and bwrap themselves run with: nothing of the worker's environment. */
const LAUNCH_ENV = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' };
/** The /etc files a program run by `sh -c` commonly needs; none holds a secret. */
const ETC_FILES = ['/etc/ld.so.cache', '/etc/alternatives', '/etc/passwd', '/etc/group', '/etc/nsswitch.conf', '/etc/localtime', '/etc/mime.types', '/etc/ssl/openssl.cnf'];
const UID_BASE = 200_000;
const UID_RANGE = 60_000;

/** The sandbox uid of an owner: stable, unprivileged, and different for (nearly) every run. */
export function sandboxUid(owner: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < owner.length; i += 1) {
    h ^= owner.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return UID_BASE + (h % UID_RANGE);
}

let systemBindsOnce: string[] | undefined;

/**
 * bwrap's arguments for the read-only system paths: merged-/usr links as links, directories bound.
 * Read from the disk once per process: the system layout does not change under a running worker.
 */
export function systemBinds(): string[] {
  systemBindsOnce ??= readSystemBinds();
  return systemBindsOnce;
}

function readSystemBinds(): string[] {
  // /etc holds only the files below; made 0755 first, or the command's uid could not look inside it.
  const args = ['--ro-bind', '/usr', '/usr', '--perms', '0755', '--dir', '/etc'];
  for (const dir of ['/bin', '/sbin', '/lib', '/lib64']) {
    if (!existsSync(dir)) continue;
    if (lstatSync(dir).isSymbolicLink()) args.push('--symlink', readlinkSync(dir), dir);
    else args.push('--ro-bind', dir, dir);
  }
  for (const file of ETC_FILES) {
    if (!existsSync(file)) continue;
    if (dirname(file) !== '/etc') args.push('--perms', '0755', '--dir', dirname(file));
    args.push('--ro-bind', file, file);
  }
  return args;
}

/**
 * The command line that runs `command` under bwrap. A root worker runs bwrap privileged (no user
 * namespace) and the command as `uid` through setpriv inside, with no capability left: a real
 * unprivileged uid, which RLIMIT_NPROC binds. A worker that is not root runs bwrap in a user namespace
 * of its own, as its own uid.
 */
export function bwrapCommand(command: string, workspace: string, limits: ExecLimits, uid: number | null): string[] {
  const namespaces = uid === null ? ['--unshare-all'] : ['--unshare-ipc', '--unshare-pid', '--unshare-net', '--unshare-uts', '--unshare-cgroup-try'];
  const asUser = uid === null ? [] : ['/usr/bin/setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', '--'];
  return [
    ...prlimitArgs(limits),
    'bwrap',
    ...namespaces,
    '--die-with-parent',
    '--new-session',
    ...systemBinds(),
    '--proc', '/proc',
    '--dev', '/dev',
    '--perms', '1777', '--tmpfs', '/tmp',
    '--bind', workspace, '/workspace',
    '--chdir', '/workspace',
    '--clearenv',
    ...Object.entries(SANDBOX_ENV).flatMap(([k, v]) => ['--setenv', k, v]),
    ...asUser,
    '/bin/sh', '-c', command,
  ];
}

function prlimitArgs(limits: ExecLimits): string[] {
  return ['prlimit', `--nproc=${limits.processes}`, `--data=${limits.memoryBytes}`, `--fsize=${limits.fileBytes}`, '--nofile=1024', '--core=0', '--'];
}

/** Gives the workspace tree to the sandbox uid, so the command can write where the tools wrote. */
async function chownTree(dir: string, uid: number): Promise<void> {
  await chown(dir, uid, uid);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    // A link is never followed: chown would change what it points at, which may be outside.
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) await chownTree(path, uid);
    else await chown(path, uid, uid);
  }
}

/** Keeps the first and the last `keep / 2` bytes of a stream, and counts what it dropped between. */
class KeptOutput {
  private head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer = Buffer.alloc(0);
  total = 0;

  constructor(private readonly keep: number) {}

  push(chunk: Buffer): void {
    this.total += chunk.length;
    const half = Math.floor(this.keep / 2);
    if (this.headBytes < half) {
      const take = chunk.subarray(0, half - this.headBytes);
      this.head.push(take);
      this.headBytes += take.length;
      chunk = chunk.subarray(take.length);
    }
    if (chunk.length === 0) return;
    const joined = Buffer.concat([this.tail, chunk]);
    this.tail = joined.subarray(Math.max(0, joined.length - half));
  }

  text(): string {
    const head = Buffer.concat(this.head);
    const cut = this.total - head.length - this.tail.length;
    if (cut <= 0) return Buffer.concat([head, this.tail]).toString('utf8');
    return `${head.toString('utf8')}\n[... ${cut} bytes cut ...]\n${this.tail.toString('utf8')}`;
  }
}

/** Spawns argv in its own process group and watches its time and output. */
function watch(argv: string[], cwd: string, limits: ExecLimits, env: Record<string, string>): Promise<ExecResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const out = new KeptOutput(limits.keptOutputBytes);
    const err = new KeptOutput(limits.keptOutputBytes);
    let timedOut = false;
    let outputLimited = false;
    const kill = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, limits.timeoutS * 1000);
    const onData = (kept: KeptOutput) => (chunk: Buffer) => {
      kept.push(chunk);
      if (!outputLimited && out.total + err.total > limits.maxOutputBytes) {
        outputLimited = true;
        kill();
      }
    };
    child.stdout.on('data', onData(out));
    child.stderr.on('data', onData(err));
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({
        exit_code: code,
        signal: signal ?? null,
        stdout: out.text(),
        stderr: err.text(),
        timed_out: timedOut,
        output_limited: outputLimited,
        duration_ms: Date.now() - started,
      });
    });
  });
}

const runsAsRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;

export class BwrapSandbox implements Sandbox {
  readonly kind = 'bwrap';

  async run(request: ExecRequest): Promise<ExecResult> {
    const uid = runsAsRoot() ? sandboxUid(request.owner) : null;
    if (uid !== null) await chownTree(request.workspace, uid);
    return watch(bwrapCommand(request.command, request.workspace, request.limits, uid), '/', request.limits, LAUNCH_ENV);
  }
}

export class UnsandboxedExec implements Sandbox {
  readonly kind = 'none';

  run(request: ExecRequest): Promise<ExecResult> {
    const argv = [...prlimitArgs(request.limits), '/bin/sh', '-c', request.command];
    return watch(argv, request.workspace, request.limits, { ...SANDBOX_ENV, HOME: request.workspace });
  }
}

/** Whether the sandbox works here, and if not, why: what a worker logs at startup before offering `exec`. */
export async function probeSandbox(kind: SandboxKind, scratch: string): Promise<{ ok: true; sandbox: Sandbox } | { ok: false; why: string }> {
  const sandbox = kind === 'bwrap' ? new BwrapSandbox() : new UnsandboxedExec();
  try {
    const result = await sandbox.run({ command: 'echo ok', workspace: scratch, owner: 'agentrun-sandbox-probe', limits: { ...DEFAULT_EXEC_LIMITS, timeoutS: 20 } });
    if (result.exit_code === 0 && result.stdout.trim() === 'ok') return { ok: true, sandbox };
    return { ok: false, why: `${kind} could not run a command (exit ${result.exit_code ?? result.signal}): ${(result.stderr || result.stdout).trim().slice(0, 500)}` };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { ok: false, why: e.code === 'ENOENT' ? `${kind === 'bwrap' ? 'bwrap or prlimit' : 'prlimit'} is not installed (${e.message})` : `${kind}: ${e.message}` };
  }
}
