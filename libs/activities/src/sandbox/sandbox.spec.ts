import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BwrapSandbox, DEFAULT_EXEC_LIMITS, probeSandbox, sandboxUid, UnsandboxedExec, type ExecLimits } from './sandbox';

/**
 * The sandbox against the real bubblewrap (deploy/local/ensure-bubblewrap.sh installs it; tests/run.sh
 * runs that before this tier). Each hostile command is contained, and the result says what happened.
 */
describe('the exec sandbox (bubblewrap)', () => {
  // Each command is a process tree; beside CI's other tiers one can take seconds to start and end.
  jest.setTimeout(30_000);
  const sandbox = new BwrapSandbox();
  const limits: ExecLimits = { ...DEFAULT_EXEC_LIMITS, timeoutS: 20 };
  let root: string;
  let workspace: string;
  const run = (command: string, over: Partial<ExecLimits> = {}) => sandbox.run({ command, workspace, owner: 'acme/run-1', limits: { ...limits, ...over } });

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'agentrun-sandbox-'));
    workspace = join(root, 'acme', 'run-1');
    await mkdir(workspace, { recursive: true });
    await writeFile(join(root, 'acme', 'secret.txt'), 'another run');
    await writeFile(join(workspace, 'hello.txt'), 'hello\n');
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  it('runs sh -c in the workspace at /workspace, as an unprivileged uid of the run, with python3 and node', async () => {
    const result = await run('pwd; id -u; cat hello.txt; echo made > made.txt; python3 -c "print(6*7)"; node -e "console.log(6*7)"');
    expect(result).toMatchObject({ exit_code: 0, signal: null, timed_out: false, output_limited: false, stderr: '' });
    const uid = process.getuid?.() === 0 ? String(sandboxUid('acme/run-1')) : String(process.getuid?.());
    expect(result.stdout.split('\n')).toEqual(['/workspace', uid, 'hello', '42', '42', '']);
    expect(await readFile(join(workspace, 'made.txt'), 'utf8')).toBe('made\n');
  });

  it('an exit code and stderr come back as they are', async () => {
    expect(await run('echo oops >&2; exit 3')).toMatchObject({ exit_code: 3, stderr: 'oops\n', stdout: '' });
  });

  it('has no variable of the platform, not even in the namespace init', async () => {
    process.env.AGENTRUN_SANDBOX_SPEC_SECRET = 'hunter2';
    try {
      const result = await run('env | sort; echo ---; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n" | grep -c hunter2');
      const [env, count] = result.stdout.split('---\n');
      expect(env.split('\n').filter((l) => l && !l.startsWith('PWD=') && !l.startsWith('SHLVL=') && !l.startsWith('_='))).toEqual(['HOME=/workspace', 'LANG=C.UTF-8', 'PATH=/usr/local/bin:/usr/bin:/bin', 'TMPDIR=/tmp']);
      expect(count.trim()).toBe('0');
    } finally {
      delete process.env.AGENTRUN_SANDBOX_SPEC_SECRET;
    }
  });

  it('reaches no network: a port listening on the host loopback is refused', async () => {
    const server: Server = createServer((s) => s.end('reached'));
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const { port } = server.address() as { port: number };
    try {
      const result = await run(`python3 -c "import socket; s=socket.create_connection(('127.0.0.1', ${port}), 3); print(s.recv(10))"`);
      expect(result.exit_code).not.toBe(0);
      expect(result.stderr).toMatch(/ConnectionRefusedError/);
    } finally {
      server.close();
    }
  });

  it('sees nothing of the platform and writes nowhere but the workspace and its own /tmp', async () => {
    const repo = resolve(__dirname, '../../../..');
    const result = await run(`ls ${repo} 2>&1; ls ../secret.txt 2>&1; ls /root 2>&1; echo x > /usr/x 2>&1; echo x > /etc/x 2>&1; echo t > /tmp/t && cat /tmp/t; ls / | tr "\\n" " "`);
    expect(result.stdout).toMatch(/No such file or directory/);
    expect(result.stdout).not.toMatch(/package\.json|another run/);
    expect(result.stderr).toMatch(/\/usr\/x: (Read-only file system|Permission denied)/);
    expect(result.stderr).toMatch(/\/etc\/x: (Read-only file system|Permission denied)/);
    expect(result.stdout).toMatch(/\nt\n/);
    const top = result.stdout.trim().split('\n').pop()?.trim().split(' ') ?? [];
    expect(top).toEqual(expect.arrayContaining(['usr', 'tmp', 'proc', 'workspace']));
    expect(top.filter((d) => ['root', 'home', 'work', 'var', 'opt', 'app', 'srv'].includes(d))).toEqual([]);
  });

  it('a symlink in the workspace pointing outside it leads nowhere writable', async () => {
    const outside = join(root, 'acme', 'secret.txt');
    await symlink(outside, join(workspace, 'escape'));
    const result = await run('echo overwritten > escape; ln -sf /etc/passwd p; echo x >> p; echo done');
    expect(result.stdout).toMatch(/done/);
    expect(await readFile(outside, 'utf8')).toBe('another run');
    expect(result.stderr).toMatch(/Read-only file system|Permission denied/);
  });

  it('sleep 9999 is killed at its timeout', async () => {
    const result = await run('echo started; sleep 9999', { timeoutS: 1 });
    expect(result).toMatchObject({ timed_out: true, exit_code: null, signal: 'SIGKILL', stdout: 'started\n' });
    expect(result.duration_ms).toBeLessThan(10_000);
  });

  it('a fork bomb hits the process limit, and everything it started ends with it', async () => {
    // bash retries a fork the limit refuses with growing sleeps: alone this takes about a second, beside
    // CI's other tiers it once took over 5 s (the bomb was held all the same), so it has 20 s.
    const result = await run('bash -c ":(){ :|:& };:" 2>/dev/null; sleep 1; echo survived', { timeoutS: 20, processes: 32 });
    expect(result.stdout).toBe('survived\n');
    expect(result.timed_out).toBe(false);
  }, 30_000);

  it('a gigabyte of output is cut off: the head and tail kept, the command killed', async () => {
    const result = await run('head -c 1000000000 /dev/zero | tr "\\0" "a"; echo never', { maxOutputBytes: 4 * 1024 * 1024, keptOutputBytes: 1024 });
    expect(result).toMatchObject({ output_limited: true, signal: 'SIGKILL' });
    expect(result.stdout).toMatch(/^a{512}\n\[\.\.\. \d+ bytes cut \.\.\.\]\na{512}$/);
  });

  it('a gigabyte written to a file stops at the file-size limit', async () => {
    const result = await run('head -c 1000000000 /dev/zero > big; echo "rc=$?"', { fileBytes: 8 * 1024 * 1024 });
    expect(result.stdout).toBe('rc=153\n');
    expect((await stat(join(workspace, 'big'))).size).toBe(8 * 1024 * 1024);
  });

  it('memory is bounded: a 2 GiB allocation fails inside', async () => {
    const result = await run('python3 -c "bytearray(2 * 1024 ** 3)"', { memoryBytes: 512 * 1024 * 1024 });
    expect(result.exit_code).not.toBe(0);
    expect(result.stderr).toMatch(/MemoryError/);
  });

  it('the probe says the sandbox works here; `none` runs the command with the same limits and nothing else', async () => {
    await expect(probeSandbox('bwrap', workspace)).resolves.toMatchObject({ ok: true });
    const plain = await new UnsandboxedExec().run({ command: 'echo plain; pwd', workspace, owner: 'x', limits });
    expect(plain.stdout).toBe(`plain\n${workspace}\n`);
  });
});
