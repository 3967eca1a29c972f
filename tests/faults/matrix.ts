import { execFile } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { isTerminal, TOPICS, type CommandOutcome, type RunEventEnvelope } from '@agentrun/contracts';
import { oneToN, sameEventText, scriptedRunShape } from '../support/invariants';
import type { Consumer } from 'kafkajs';
import { APPS, followInto, Platform, uniqueId, type TopicRecord } from '../support/platform';
import { REPO_ROOT } from '../support/stack-env';
import { waitFor } from '../support/wait';

const exec = promisify(execFile);

/**
 * The fault matrix's machinery (the scenarios are split over tests/faults/*.fault.ts so the ones that
 * only touch their own platform run in parallel; the ones that restart or stop a server of the shared
 * stack are in a `@stack-exclusive` file). Each scenario starts two agents (16 steps with tools, a
 * research child and a per-turn snapshot series), holds both (paused) half-way, starts an eval
 * and lets one agent go on, asserts where every run is at that moment (the held agent paused, the other
 * running, neither at its last step, the eval not finished: it waits for its review), injects one fault,
 * lets the held agent go on, and checks that the runs made progress after the fault and then the
 * invariants: nothing lost, nothing twice.
 *
 * AGENTRUN_FAULTS_MATRIX picks the scenarios: all of them when unset (or `all`), `core` for one per kind
 * of fault (kill -9 of the orchestrator, a Temporal restart, lost acks), or a comma-separated list of ids.
 */
export const ORG = 'faults';
const AGENT_STEPS = 24;
const EVAL_CASES = 6;
/**
 * The agents are held once each has recorded this many effects (of 22: under a third of the way, so the
 * time a run needs before its fault overlaps the scenario before, while enough of it is left after the
 * fault). The pause is a command: it must land before the run's last step, and beside the parallel pass
 * it once took longer than the 8 paced effects that were left with 16 steps (the run ended `done`).
 */
const HELD_AFTER_EFFECTS = 7;
/** A tool's start-to-close here: the Postgres pause outlasts it, so calls in flight time out and retry. */
const TOOL_START_TO_CLOSE_S = 5;

/**
 * Settings that only shorten waits: a tool paced to stay in flight long enough to be killed (two 250 ms
 * ticks), a dead tool or eval case noticed within 2 s (heartbeats), a stuck tool given up after 5 s.
 */
export const FAULT_PLATFORM_ENV: Record<string, string> = {
  TOOL_PACE_TICKS: '2',
  TOOL_PACE_MS: '250',
  AGENTRUN_TOOL_HEARTBEAT_S: '2',
  AGENTRUN_TOOL_START_TO_CLOSE_S: String(TOOL_START_TO_CLOSE_S),
  EVAL_CASE_HEARTBEAT_S: '2',
};

export type ScenarioId =
  | `kill-${(typeof APPS)[number]}`
  | 'restart-kafka'
  | 'restart-temporal'
  | 'restart-postgres'
  | 'crash-window'
  | 'lost-ack'
  | 'pause-postgres';

interface Scenario {
  id: ScenarioId;
  name: string;
  /** One scenario per kind of fault: AGENTRUN_FAULTS_MATRIX=core runs these. */
  core: boolean;
  /** Settings of apps from the platform's start (a fault point armed before any run): such a scenario comes first in its file. */
  appEnv?: Partial<Record<(typeof APPS)[number], Record<string, string>>>;
  /** The fault itself, injected while one agent is held and the other runs. */
  inject?: (p: Platform) => Promise<void>;
  /** What the topic must show for the fault to have happened at all. */
  expectRepublished?: boolean;
}

async function restartApp(p: Platform, app: (typeof APPS)[number], env: Record<string, string>): Promise<void> {
  p.appEnv[app] = env;
  await p.stopApp(app);
  await p.startApp(app);
}

/** Every process of the stack's Postgres cluster: the postmaster and its backends. */
function postgresPids(): number[] {
  const postmaster = Number(readFileSync(join(REPO_ROOT, '.stack/logs/postgres.pid'), 'utf8').trim());
  const children = readFileSync(`/proc/${postmaster}/task/${postmaster}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  return [postmaster, ...children];
}

const SCENARIOS: Scenario[] = [
  ...APPS.map(
    (app): Scenario => ({
      id: `kill-${app}`,
      name: `kill -9 of the ${app}, then a restart`,
      core: app === 'orchestrator',
      inject: async (p) => {
        expect(await p.stopApp(app, 'SIGKILL')).toBe(-1);
        await p.startApp(app);
      },
    }),
  ),
  ...(['kafka', 'temporal', 'postgres'] as const).map(
    (server): Scenario => ({
      id: `restart-${server}`,
      name: `restart of the ${server} server`,
      core: server === 'temporal',
      inject: async (p) => {
        if (server === 'postgres') await p.db?.end();
        await exec('bash', ['deploy/local/stack.sh', 'restart', server], { cwd: REPO_ROOT });
        if (server === 'postgres') await p.reconnectDb();
      },
    }),
  ),
  {
    id: 'crash-window',
    name: 'the projector dies between its Postgres commit and its offset commit',
    core: false,
    inject: async (p) => {
      p.appEnv.projector = { AGENTRUN_FAULTS: 'projector.crash_after_apply=2' };
      await p.stopApp('projector');
      // Not waited ready: it may apply its second batch, and die, before it answers /readyz.
      await p.startApp('projector', { ready: false });
      expect(await p.exited('projector')).toBe(-1);
      expect(readFileSync(join(p.dataDir, 'logs', 'projector.log'), 'utf8')).toMatch(/fault point: dying between the Postgres commit and the offset commit/);
      await restartApp(p, 'projector', {});
    },
  },
  {
    id: 'lost-ack',
    name: 'publishes whose ack is lost are retried (every third publish)',
    core: true,
    // Armed from the platform's start (no restart to arm it); the orchestrator is restarted without it afterwards.
    appEnv: { orchestrator: { AGENTRUN_FAULTS: 'publish.lose_ack_every=3' } },
    expectRepublished: true,
  },
  {
    id: 'pause-postgres',
    name: 'Postgres paused (SIGSTOP) longer than the activity timeouts',
    core: false,
    inject: async () => {
      const pids = postgresPids();
      for (const pid of pids) process.kill(pid, 'SIGSTOP');
      try {
        // Longer than a tool's start-to-close and every heartbeat timeout: the calls in flight time out and retry.
        await new Promise((resolve) => setTimeout(resolve, (TOOL_START_TO_CLOSE_S + 2) * 1000));
      } finally {
        for (const pid of pids) process.kill(pid, 'SIGCONT');
      }
    },
  },
];

/** The scenarios AGENTRUN_FAULTS_MATRIX selects among `ids` (all when it is unset or `all`). */
function selected(ids: ScenarioId[]): Scenario[] {
  const choice = (process.env.AGENTRUN_FAULTS_MATRIX ?? '').trim();
  const known = new Set(SCENARIOS.map((s) => s.id as string));
  const wanted = choice === '' || choice === 'all' ? undefined : choice === 'core' ? SCENARIOS.filter((s) => s.core).map((s) => s.id as string) : choice.split(',').map((s) => s.trim());
  const unknown = (wanted ?? []).filter((id) => !known.has(id));
  if (unknown.length) throw new Error(`AGENTRUN_FAULTS_MATRIX: unknown scenario ${unknown.join(', ')} (all, core, or ids among ${[...known].join(', ')})`);
  return ids.map((id) => SCENARIOS.find((s) => s.id === id)!).filter((s) => !wanted || wanted.includes(s.id));
}

interface Command {
  id: string;
  type: string;
  run_id: string;
}

interface Progress {
  status: string | undefined;
  effects: number;
}

/** Resolves `work`, or rejects as soon as an app of the platform has died (none should, but for the fault). */
async function whileAppsLive<T>(p: Platform, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const died = new Promise<never>((_resolve, reject) => {
    timer = setInterval(() => {
      const dead = p.instances().filter((app) => {
        try {
          process.kill(p.pidOf(app), 0);
          return false;
        } catch {
          return true;
        }
      });
      if (dead.length === 0) return;
      clearInterval(timer);
      const tails = dead.map((app) => `${app}:\n${readFileSync(join(p.dataDir, 'logs', `${app}.log`), 'utf8').trimEnd().split('\n').slice(-15).join('\n')}`);
      reject(new Error(`${dead.join(', ')} died outside the fault; the last lines of the log:\n${tails.join('\n')}`));
    }, 500);
  });
  try {
    return await Promise.race([work, died]);
  } finally {
    clearInterval(timer);
  }
}

/** A scenario's runs, from their start to their check. */
class ScenarioRuns {
  readonly commands: Command[] = [];
  readonly agents: [string, string];
  readonly evalRun: string;
  readonly shape = scriptedRunShape(AGENT_STEPS);
  /** Where each run was when the fault landed, and the database's clock once it was over. */
  atFault = new Map<string, Progress>();
  faultOver = '';
  /** The read model's rows of the runs, watched every 200 ms from just before the fault until the end. */
  readonly seen = new Map<string, { status: string; state_seq: number }[]>();
  private watching?: Promise<void>;
  private stopWatching = false;
  readonly timings: Record<string, number> = {};

  constructor(
    private readonly p: Platform,
    private readonly outcomes: TopicRecord<CommandOutcome>[],
    readonly scenario: Scenario,
  ) {
    this.agents = [uniqueId(`${scenario.id}-agent`), uniqueId(`${scenario.id}-agent`)];
    this.evalRun = uniqueId(`${scenario.id}-eval`);
  }

  async send(type: string, runId: string, payload: Record<string, unknown> = {}): Promise<void> {
    const id = uniqueId('c');
    this.commands.push({ id, type, run_id: runId });
    const command = { command_id: id, type, org: ORG, run_id: runId, payload };
    // Right after a broker restart the producer may need a few tries; the same command twice is a `duplicate`.
    await waitFor(`${type} of ${runId} published`, async () => {
      await this.p.publishCommand(command);
      return true;
    }, 60_000, 500);
  }

  async decided(): Promise<void> {
    for (const command of this.commands) {
      await waitFor(`the outcome of ${command.type} (${command.run_id})`, () => this.outcomes.some((o) => o.value.command_id === command.id), 60_000, 50);
    }
  }

  /** Effects the activities recorded for a run so far (the read model may lag behind them). */
  async effects(runId: string, after?: string): Promise<number> {
    const rows = await this.p.query<{ n: string }>(
      `SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)${after ? ' AND created_at > $2' : ''}`,
      after ? [`${ORG}/${runId}:`, after] : [`${ORG}/${runId}:`],
    );
    return Number(rows[0].n);
  }

  async progress(runId: string): Promise<Progress> {
    return { status: await this.p.statusOf(ORG, runId), effects: await this.effects(runId) };
  }

  /** Both agents started and held (paused) half-way, with a context injected into each. */
  prepare(): Promise<void> {
    return whileAppsLive(this.p, this.startAndHold());
  }

  private async startAndHold(): Promise<void> {
    const t0 = Date.now();
    for (const runId of this.agents) {
      await this.send('agent.start', runId, { goal: `survive: ${this.scenario.name}`, max_steps: AGENT_STEPS, snapshots: { per_turn: true, timeout_seconds: 30 } });
    }
    // How far a run really is: its effects are recorded by the activities themselves, as they run. The
    // read model can lag far behind while publishes are the fault (lost acks retried with backoff).
    await waitFor('the agents to be half-way', async () => (await Promise.all(this.agents.map((a) => this.effects(a)))).every((n) => n >= HELD_AFTER_EFFECTS), 120_000, 100);
    for (const runId of this.agents) await this.send('agent.inject_context', runId, { text: `note before the fault (${this.scenario.id})` });
    for (const runId of this.agents) await this.send('agent.pause', runId);
    for (const runId of this.agents) await this.p.waitForStatus(ORG, runId, 'paused', 120_000);
    this.timings.prepare = Date.now() - t0;
  }

  /**
   * The eval starts, one agent goes on, and the fault is injected: at that moment the held agent is
   * paused and the other running, each with steps left, and the eval is not finished (it waits for a
   * review that is only given after the fault). The held agent goes on once the fault is over.
   */
  async strike(): Promise<void> {
    const t0 = Date.now();
    const [held, free] = this.agents;
    await this.send('eval.start', this.evalRun, { model: 'm-1', suite: 'faults', cases: EVAL_CASES, fail_fraction: 0, reviewers: ['rita'] });
    await this.send('agent.resume', free);
    await this.p.waitForStatus(ORG, free, 'running', 120_000);
    await waitFor(`the eval ${this.evalRun} to be under way`, async () => ['running', 'awaiting_review'].includes((await this.p.statusOf(ORG, this.evalRun)) ?? ''), 120_000, 100);
    // Decided before the fault, so the fault cannot make them late; whether they are applied once is checked after it.
    await this.decided();
    this.watch();

    for (const runId of [...this.agents, this.evalRun]) this.atFault.set(runId, await this.progress(runId));
    const at = (runId: string) => this.atFault.get(runId)!;
    expect(at(held)).toEqual({ status: 'paused', effects: expect.any(Number) });
    expect(at(free)).toEqual({ status: 'running', effects: expect.any(Number) });
    for (const runId of this.agents) expect(at(runId).effects).toBeLessThan(this.shape.effects);
    expect(['running', 'awaiting_review']).toContain(at(this.evalRun).status);
    this.timings.hold = Date.now() - t0;

    const t1 = Date.now();
    await this.scenario.inject?.(this.p);
    this.faultOver = (await this.p.query<{ now: string }>('SELECT clock_timestamp()::text AS now'))[0].now;
    this.timings.fault = Date.now() - t1;
    await this.send('agent.resume', held);
  }

  private watch(): void {
    this.watching = (async () => {
      while (!this.stopWatching) {
        try {
          const rows = await this.p.query<{ run_id: string; status: string; state_seq: number }>('SELECT run_id, status, state_seq FROM runs WHERE org = $1 AND run_id = ANY($2)', [
            ORG,
            [...this.agents, this.evalRun],
          ]);
          for (const row of rows) this.seen.set(row.run_id, [...(this.seen.get(row.run_id) ?? []), row]);
        } catch {
          // Postgres is the fault: nothing to read for now.
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
  }

  /** Every run to its end: the agents `done`, the eval approved and `published`. */
  finish(): Promise<void> {
    return whileAppsLive(this.p, this.toTheEnd());
  }

  private async toTheEnd(): Promise<void> {
    const t0 = Date.now();
    for (const runId of this.agents) await this.p.waitForStatus(ORG, runId, 'done', 240_000);
    await this.p.waitForStatus(ORG, this.evalRun, 'awaiting_review', 240_000);
    await this.send('eval.approve', this.evalRun, { reviewer: 'rita' });
    await this.p.waitForStatus(ORG, this.evalRun, 'published', 120_000);
    this.stopWatching = true;
    await this.watching;
    this.timings.finish = Date.now() - t0;
  }

  /** Stops the watcher of a scenario that failed on its way, so it does not outlive its test. */
  async abandon(): Promise<void> {
    this.stopWatching = true;
    await this.watching;
  }
}

const RANK: Record<string, number> = { queued: 0 };

/** The invariants, and the runs' progress after the fault. Returns the counts it printed. */
async function check(p: Platform, runs: ScenarioRuns, events: TopicRecord<RunEventEnvelope>[], outcomes: TopicRecord<CommandOutcome>[]): Promise<string> {
  const { agents, evalRun, shape, scenario } = runs;
  const [held] = agents;

  // 0. The runs went on after the fault: every agent recorded effects after the moment it landed (the held
  // one after the fault was over too, from its release), and the eval was published after it.
  for (const runId of agents) expect(await runs.effects(runId)).toBeGreaterThan(runs.atFault.get(runId)!.effects);
  expect(await runs.effects(held, runs.faultOver)).toBeGreaterThan(0);
  const resumed = runs.commands.filter((c) => c.type === 'agent.resume' && c.run_id === held).at(-1)!;
  const resumedAt = await p.query<{ seq: number }>(`SELECT seq FROM run_events WHERE org = $1 AND run_id = $2 AND event->'payload'->>'command_id' = $3`, [ORG, held, resumed.id]);
  expect(resumedAt).toHaveLength(1);
  const stepsAfter = await p.query(`SELECT seq FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'step_completed' AND seq > $3`, [ORG, held, resumedAt[0].seq]);
  expect(stepsAfter.length).toBeGreaterThan(0);

  // 1. The read model holds exactly the events on the topic: seqs 1..N, no gaps, no duplicates.
  let topicRecords = 0;
  let distinct = 0;
  for (const runId of [...agents, evalRun]) {
    const [row] = await p.query<{ last_seq: number; status: string }>('SELECT last_seq, status FROM runs WHERE org = $1 AND run_id = $2', [ORG, runId]);
    const n = row.last_seq;
    await waitFor(`every event of ${runId} on the topic`, () => new Set(events.filter((e) => e.value.run_id === runId).map((e) => e.value.seq)).size === n, 60_000);
    const onTopic = events.filter((e) => e.value.org === ORG && e.value.run_id === runId);
    topicRecords += onTopic.length;
    const bySeq = new Map<number, RunEventEnvelope>();
    for (const record of onTopic) {
      const first = bySeq.get(record.value.seq);
      // A repeat on the topic is the same event published again (only when it was made may differ).
      if (first) expect(sameEventText(record.value)).toBe(sameEventText(first));
      else bySeq.set(record.value.seq, record.value);
    }
    distinct += bySeq.size;
    expect([...bySeq.keys()].sort((a, b) => a - b)).toEqual(oneToN(n));
    // The read model keeps the first of each seq.
    const stored = await p.query<{ seq: number; event: RunEventEnvelope }>('SELECT seq, event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [ORG, runId]);
    expect(stored.map((r) => r.seq)).toEqual(oneToN(n));
    for (const r of stored) expect(r.event).toEqual(bySeq.get(r.seq));
    // 2. Status never moved backwards: on the topic in seq order, and in the read model as watched.
    let terminal: string | undefined;
    for (const seq of oneToN(n)) {
      const status = bySeq.get(seq)!.payload.state?.status;
      if (status === undefined) continue;
      if (terminal) expect(status).toBe(terminal);
      if (seq > 1) expect(status).not.toBe('queued');
      if (isTerminal(status)) terminal = status;
    }
    const watched = runs.seen.get(runId) ?? [];
    // Watched from before the fault to the end: at least that row and the last one.
    expect(watched.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < watched.length; i++) {
      expect(watched[i].state_seq).toBeGreaterThanOrEqual(watched[i - 1].state_seq);
      if (isTerminal(watched[i - 1].status)) expect(watched[i].status).toBe(watched[i - 1].status);
      expect((RANK[watched[i].status] ?? 1) >= (RANK[watched[i - 1].status] ?? 1)).toBe(true);
    }
  }
  if (scenario.expectRepublished) expect(topicRecords).toBeGreaterThan(distinct);

  // 3. Every ledger key has exactly one effect: one per model call and tool step, one per case.
  const effects = async (prefix: string) => Number((await p.query<{ n: string }>('SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)', [prefix]))[0].n);
  let effectRows = 0;
  for (const runId of agents) {
    expect(await effects(`${ORG}/${runId}:`)).toBe(shape.effects);
    expect(await effects(`${ORG}/${runId}/research/`)).toBe(shape.research);
    effectRows += shape.effects + shape.research;
    expect(await p.query('SELECT 1 FROM gpu_leases WHERE org = $1 AND run_id = $2', [ORG, runId])).toEqual([]);
    // The snapshot series survived too: every turn, then the final, each row once; the final's archive is in the object store.
    const rows = (await p.query<{ event: RunEventEnvelope }>(`SELECT event FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'snapshot_captured' ORDER BY seq`, [ORG, runId])).map(
      (r) => r.event.payload.snapshot as { snapshot_id: string; turn?: number; is_final: boolean; bundle_object_url?: string | null; bytes?: number | null },
    );
    expect(rows.filter((r) => r.turn !== undefined).map((r) => r.turn)).toEqual(oneToN(AGENT_STEPS));
    const final = rows[rows.length - 1];
    expect(final).toMatchObject({ is_final: true, bundle_object_url: expect.stringMatching(/^file:\/\//) });
    const archive = fileURLToPath(final.bundle_object_url!);
    expect(archive.startsWith(join(p.dataDir, 'objects'))).toBe(true);
    expect(existsSync(archive) && statSync(archive).size).toBeGreaterThan(0);
    const manifest = await p.query<{ snapshot_id: string; is_final: boolean; bundle_object_url: string | null }>(
      'SELECT snapshot_id, is_final, bundle_object_url FROM snapshots WHERE org = $1 AND run_id = $2 ORDER BY seq',
      [ORG, runId],
    );
    expect(manifest.map((m) => m.snapshot_id)).toEqual(rows.map((r) => r.snapshot_id));
    expect(manifest[manifest.length - 1]).toEqual({ snapshot_id: final.snapshot_id, is_final: true, bundle_object_url: final.bundle_object_url });
  }
  expect(await effects(`${ORG}/${evalRun}:`)).toBe(EVAL_CASES);
  effectRows += EVAL_CASES;

  // 4. Every command was applied once: one decision each, accepted, and its effect in the run once.
  for (const command of runs.commands) {
    const decided = await p.query<{ outcome: string }>('SELECT outcome FROM command_ledger WHERE org = $1 AND command_id = $2', [ORG, command.id]);
    expect(decided).toEqual([{ outcome: 'accepted' }]);
    // The test's own consumer may still be catching up after a broker restart.
    await waitFor(`the outcome of ${command.id} on the topic`, () => outcomes.some((o) => o.value.command_id === command.id), 90_000);
    const told = outcomes.filter((o) => o.value.command_id === command.id).map((o) => o.value.outcome);
    expect(told[0]).toBe('accepted');
    expect(told.slice(1).every((o) => o === 'accepted' || o === 'duplicate')).toBe(true);
    if (['agent.inject_context', 'agent.pause', 'agent.resume', 'eval.approve'].includes(command.type)) {
      const applied = await p.query("SELECT seq FROM run_events WHERE org = $1 AND run_id = $2 AND event->'payload'->>'command_id' = $3", [ORG, command.run_id, command.id]);
      expect(applied).toHaveLength(1);
    }
  }

  const at = agents.map((a) => `${runs.atFault.get(a)!.status} at ${runs.atFault.get(a)!.effects}/${shape.effects}`).join(', ');
  return (
    `agents ${at} effects when the fault landed, eval ${runs.atFault.get(evalRun)!.status}; events on the topic ${topicRecords} (${topicRecords - distinct} republished), ` +
    `in the read model ${distinct}; effect rows ${effectRows}, none repeated; commands ${runs.commands.length}, each applied once`
  );
}

/**
 * One file's share of the matrix: one platform, its scenarios one after another. Once a scenario's fault
 * is over, the next one's agents are started and held while it finishes (they are held half-way when
 * that next fault lands, and every run of the scenario before has ended by then). A scenario
 * that arms an app from the start (`appEnv`) comes first in its file, and the app is restarted without
 * it before the next scenario's runs start.
 */
export function faultSuite(ids: ScenarioId[]): void {
  const chosen = selected(ids);
  describe(`faults: nothing is lost, nothing happens twice (${ids.join(', ')})`, () => {
    if (chosen.length === 0) {
      it(`has none of its scenarios selected (AGENTRUN_FAULTS_MATRIX=${process.env.AGENTRUN_FAULTS_MATRIX})`, () => {
        expect(chosen).toEqual([]);
      });
      return;
    }
    const late = chosen.findIndex((s, i) => s.appEnv && i > 0);
    if (late > 0) throw new Error(`${chosen[late].id} arms its platform from the start: it must come first in its file`);
    const platform = new Platform(FAULT_PLATFORM_ENV);
    Object.assign(platform.appEnv, chosen[0].appEnv ?? {});
    // The test's one connection is shared by the watcher, the scenario and the next one's preparation:
    // their queries take turns (as pg would queue them), rather than overlapping on the client.
    const query = platform.query.bind(platform);
    let turn: Promise<unknown> = Promise.resolve();
    platform.query = <T>(sql: string, params: unknown[] = []): Promise<T[]> => {
      const result = turn.then(() => query<T>(sql, params));
      turn = result.catch(() => undefined);
      return result;
    };
    let events: TopicRecord<RunEventEnvelope>[];
    let outcomes: TopicRecord<CommandOutcome>[];
    const consumers: Consumer[] = [];
    let platformStartMs = 0;
    // The next scenario's runs, started and held while the one before finishes.
    let next: { runs: ScenarioRuns; ready: Promise<unknown>; early: boolean } | undefined;
    const prepared = (scenario: Scenario, early: boolean) => {
      const runs = new ScenarioRuns(platform, outcomes, scenario);
      // Settled either way, so a failure is the next test's to report, never an unhandled rejection.
      const ready = runs.prepare().then(
        () => undefined,
        (err: unknown) => err,
      );
      return { runs, ready, early };
    };

    beforeAll(async () => {
      const t0 = Date.now();
      await platform.start();
      // The test's own consumers, with a short session: after a broker restart their group settles in
      // seconds (the default 30 s session would hold the checks up); an idle fetch waits 1 s, not 5 s,
      // which is also what a disconnect waits for.
      const follow = async <T>(topic: string) => {
        const consumer = platform.kafka.consumer({ groupId: `${platform.id}-faults-${uniqueId('follow')}`, sessionTimeout: 6_000, heartbeatInterval: 500, maxWaitTimeInMs: 1_000 });
        consumers.push(consumer);
        await consumer.connect();
        return followInto<T>(consumer, platform.topic(topic));
      };
      events = await follow<RunEventEnvelope>(TOPICS.runEvents);
      outcomes = await follow<CommandOutcome>(TOPICS.commandResults);
      platformStartMs = Date.now() - t0;
    });
    afterAll(async () => {
      await next?.ready;
      // Every check is done: the apps are killed rather than drained (a graceful stop waits out their grace periods).
      await Promise.all([...consumers.map((c) => c.disconnect().catch(() => undefined)), ...platform.instances().map((app) => platform.stopApp(app, 'SIGKILL'))]);
      await platform.stop();
    });

    it.each(chosen.map((s, i) => [s.name, s, i] as const))('%s', async (_name, scenario, i) => {
      const t0 = Date.now();
      const mine = next?.runs.scenario === scenario ? next : prepared(scenario, false);
      next = undefined;
      const failed = await mine.ready;
      if (failed) throw failed;
      const runs = mine.runs;
      const following = chosen[i + 1];
      try {
        await runs.strike();
        if (following && !scenario.appEnv) next = prepared(following, true);
        await runs.finish();
      } finally {
        await runs.abandon();
      }
      if (scenario.appEnv) {
        // Disarmed before the next scenario's runs start.
        for (const app of Object.keys(scenario.appEnv) as (typeof APPS)[number][]) await restartApp(platform, app, {});
        if (following) next = prepared(following, true);
      }
      const t1 = Date.now();
      const counts = await check(platform, runs, events, outcomes);
      const { prepare, hold, fault, finish } = runs.timings;
      console.log(
        `[faults] ${scenario.name}: ${counts}. Times (s): test ${((Date.now() - t0) / 1000).toFixed(1)}` +
          ` (prepare ${(prepare / 1000).toFixed(1)}${mine.early ? ', during the scenario before' : ''}, hold ${(hold / 1000).toFixed(1)}, fault ${(fault / 1000).toFixed(1)},` +
          ` finish ${(finish / 1000).toFixed(1)}, check ${((Date.now() - t1) / 1000).toFixed(1)})${i === 0 ? `, platform start ${(platformStartMs / 1000).toFixed(1)}` : ''}`,
      );
    });
  });
}
