import { execFileSync, spawnSync } from 'node:child_process';
import { builtinModules } from 'node:module';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../support/stack-env';

const LIB = join(REPO_ROOT, 'libs/contracts');
const manifest = JSON.parse(readFileSync(join(LIB, 'package.json'), 'utf8')) as { name: string; dependencies: Record<string, string> };

/** A publisher's own script: it knows nothing of this repository, only the installed package. */
const PUBLISHER = `
const { TOPICS } = require('@agentrun/contracts');
const { buildCommand, CommandBuildError, readRunStateRecord } = require('@agentrun/contracts/validation');
const built = buildCommand('agent.start', { org: 'acme', run_id: 'agent-1', command_id: 'c-1', payload: { goal: 'find the bug' } });
let refused;
try {
  buildCommand('eval.approve', { org: 'acme', run_id: 'eval-1', payload: {} });
} catch (err) {
  refused = { isBuildError: err instanceof CommandBuildError, reason: err.reason, message: err.message };
}
const state = readRunStateRecord(Buffer.from('{"org":"acme"}'));
process.stdout.write(JSON.stringify({ topic: TOPICS.commands, runState: TOPICS.runState, key: built.key, value: JSON.parse(built.value), refused, state, from: require.resolve('@agentrun/contracts') }));
`;

describe('@agentrun/contracts as a package of its own', () => {
  let dir: string;
  let tarball: string;
  let files: string[];

  beforeAll(() => {
    execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-b', LIB]);
    dir = mkdtempSync(join(tmpdir(), 'agentrun-contracts-'));
    const [packed] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: LIB, encoding: 'utf8' })) as { filename: string; files: { path: string }[] }[];
    tarball = join(dir, packed.filename);
    files = packed.files.map((f) => f.path);
  }, 30_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('ships the compiled lib, its types and its README, and no tests', () => {
    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'dist/index.js', 'dist/index.d.ts', 'dist/validation.js', 'dist/validation.d.ts']));
    expect(files.filter((f) => /spec|fixtures|tsbuildinfo|\.map$/.test(f))).toEqual([]);
  });

  it('depends only on what it declares, none of it another lib of ours', () => {
    expect(Object.keys(manifest.dependencies).sort()).toEqual(['@sinclair/typebox', 'ajv', 'ajv-formats']);
    const required = new Set<string>();
    for (const file of files.filter((f) => f.endsWith('.js'))) {
      for (const [, spec] of readFileSync(join(LIB, file), 'utf8').matchAll(/require\("([^"]+)"\)/g)) {
        if (!spec.startsWith('.')) required.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
      }
    }
    const undeclared = [...required].filter((name) => !manifest.dependencies[name] && !builtinModules.includes(name.replace(/^node:/, '')));
    expect(undeclared).toEqual([]);
  });

  it('installs from its tarball outside the repository and builds and checks commands in a plain Node script', () => {
    const app = join(dir, 'publisher');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'publisher', private: true }));
    writeFileSync(join(app, 'publish.js'), PUBLISHER);
    // From the npm cache when its dependencies are there; otherwise (no network in the test) the tarball is
    // unpacked as npm would and its three dependencies resolve from the repository's node_modules.
    const install = spawnSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], { cwd: app, encoding: 'utf8' });
    const env = { ...process.env };
    if (install.status !== 0) {
      const target = join(app, 'node_modules', manifest.name);
      mkdirSync(target, { recursive: true });
      execFileSync('tar', ['-xzf', tarball, '-C', target, '--strip-components=1']);
      env.NODE_PATH = join(REPO_ROOT, 'node_modules');
    }
    const out = JSON.parse(execFileSync(process.execPath, ['publish.js'], { cwd: app, env, encoding: 'utf8' })) as Record<string, unknown>;
    expect(out.from).toBe(join(app, 'node_modules/@agentrun/contracts/dist/index.js'));
    expect(out).toMatchObject({
      topic: 'agentrun.commands.v1',
      runState: 'agentrun.run-state.v1',
      key: 'agent-1',
      value: { command_id: 'c-1', type: 'agent.start', org: 'acme', run_id: 'agent-1', payload: { goal: 'find the bug' } },
      refused: { isBuildError: true, reason: 'invalid_payload', message: "payload must have required property 'reviewer'" },
      state: { ok: false },
    });
  }, 30_000);
});
