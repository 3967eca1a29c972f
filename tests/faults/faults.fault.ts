import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { isTerminal, TOPICS, type CommandOutcome, type RunEventEnvelope } from '@agentrun/contracts';
import { oneToN, sameEventText, scriptedRunShape } from '../support/invariants';
import { APPS, Platform, uniqueId, type TopicRecord } from '../support/platform';
import { REPO_ROOT } from '../support/stack-env';
import { waitFor } from '../support/wait';

const exec = promisify(execFile);

/**
 * The fault matrix: each scenario starts real runs (agents with tools, a research child and a
 * snapshot series; an eval with cases and a review), injects one fault mid-run, and then checks the
 * same invariants. `npm test` runs one scenario per kind of fault (an app, a server, a lost ack);
 * `npm run test:faults` runs them all.
 */
const WHOLE_MATRIX = process.env.AGENTRUN_FAULTS_MATRIX === 'all';
const ORG = 'faults';
const AGENT_STEPS = 16;
const EVAL_CASES = 6;

interface Scenario {
  name: string;
  kind: 'app' | 'server' | 'lost-ack' | 'crash-window' | 'pause';
  /** Part of the scenarios `npm test` runs. */
  core: boolean;
  /** Armed before the runs start (a fault point), undone after the invariants. */
  arm?: (p: Platform) => Promise<void>;
  disarm?: (p: Platform) => Promise<void>;
  /** The fault itself, injected once the runs are a few steps in. */
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
      name: `kill -9 of the ${app}, then a restart`,
      kind: 'app',
      core: app === 'orchestrator',
      inject: async (p) => {
        expect(await p.stopApp(app, 'SIGKILL')).toBe(-1);
        await p.startApp(app);
      },
    }),
  ),
  ...(['kafka', 'temporal', 'postgres'] as const).map(
    (server): Scenario => ({
      name: `restart of the ${server} server`,
      kind: 'server',
      core: server === 'temporal',
      inject: async (p) => {
        if (server === 'postgres') await p.db?.end();
        await exec('bash', ['deploy/local/stack.sh', 'restart', server], { cwd: REPO_ROOT });
        if (server === 'postgres') await p.reconnectDb();
      },
    }),
  ),
  {
    name: 'the projector dies between its Postgres commit and its offset commit',
    kind: 'crash-window',
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
    name: 'publishes whose ack is lost are retried (every third publish)',
    kind: 'lost-ack',
    core: true,
    arm: (p) => restartApp(p, 'orchestrator', { AGENTRUN_FAULTS: 'publish.lose_ack_every=3' }),
    disarm: (p) => restartApp(p, 'orchestrator', {}),
    expectRepublished: true,
  },
  {
    name: 'Postgres paused (SIGSTOP) longer than the activity timeouts',
    kind: 'pause',
    core: false,
    inject: async () => {
      const pids = postgresPids();
      for (const pid of pids) process.kill(pid, 'SIGSTOP');
      try {
        // Longer than a tool's start-to-close (8 s here) and the command claim's lease.
        await new Promise((resolve) => setTimeout(resolve, 12_000));
      } finally {
        for (const pid of pids) process.kill(pid, 'SIGCONT');
      }
    },
  },
];

const RANK: Record<string, number> = { queued: 0 };

describe('faults: nothing is lost, nothing happens twice', () => {
  const platform = new Platform({
    TOOL_PACE_TICKS: '2',
    TOOL_PACE_MS: '250',
    AGENTRUN_TOOL_HEARTBEAT_S: '2',
    AGENTRUN_TOOL_START_TO_CLOSE_S: '8',
    EVAL_CASE_HEARTBEAT_S: '2',
  });
  let events: TopicRecord<RunEventEnvelope>[];
  let outcomes: TopicRecord<CommandOutcome>[];

  beforeAll(async () => {
    await platform.start();
    events = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
  });
  afterAll(() => platform.stop());

  const chosen = SCENARIOS.filter((s) => WHOLE_MATRIX || s.core);

  it.each(chosen.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    const tag = scenario.kind;
    await scenario.arm?.(platform);
    const commands: { id: string; type: string; run_id: string }[] = [];
    const send = async (type: string, runId: string, payload: Record<string, unknown>) => {
      const id = uniqueId('c');
      commands.push({ id, type, run_id: runId });
      await platform.publishCommand({ command_id: id, type, org: ORG, run_id: runId, payload });
    };
    const agents = [uniqueId(`${tag}-agent`), uniqueId(`${tag}-agent`)];
    const evalRun = uniqueId(`${tag}-eval`);
    for (const runId of agents) {
      await send('agent.start', runId, { goal: `survive: ${scenario.name}`, max_steps: AGENT_STEPS, snapshots: { per_turn: true, timeout_seconds: 30 } });
    }
    await send('eval.start', evalRun, { model: 'm-1', suite: 'faults', cases: EVAL_CASES, fail_fraction: 0, reviewers: ['rita'] });

    // How far a run really is: its effects are recorded by the activities themselves, as they run. The read
    // model can lag far behind while publishes are the fault (lost acks retried with backoff), long enough
    // for a run to finish before a command "a few steps in" by the read model arrives.
    const effectsSoFar = async (runId: string) =>
      Number((await platform.query<{ n: string }>('SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)', [`${ORG}/${runId}:`]))[0].n);
    await waitFor('the agents to be a few steps in', async () => (await Promise.all(agents.map(effectsSoFar))).every((n) => n >= 3), 120_000, 100);
    for (const runId of agents) await send('agent.inject_context', runId, { text: `note before the fault (${scenario.kind})` });
    // Decided before the fault, so the fault cannot make them late; whether they are applied once is checked after it.
    for (const command of commands) await waitFor(`the outcome of ${command.type}`, () => outcomes.some((o) => o.value.command_id === command.id), 60_000);

    // Watch the read model while the fault happens: a run's state never goes back.
    const seen = new Map<string, { status: string; state_seq: number }[]>();
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        try {
          const rows = await platform.query<{ run_id: string; status: string; state_seq: number }>(
            'SELECT run_id, status, state_seq FROM runs WHERE org = $1 AND run_id = ANY($2)',
            [ORG, [...agents, evalRun]],
          );
          for (const row of rows) seen.set(row.run_id, [...(seen.get(row.run_id) ?? []), row]);
        } catch {
          // Postgres is the fault: nothing to read for now.
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();

    await scenario.inject?.(platform);

    for (const runId of agents) await platform.waitForStatus(ORG, runId, 'done', 240_000);
    await platform.waitForStatus(ORG, evalRun, 'awaiting_review', 240_000);
    await send('eval.approve', evalRun, { reviewer: 'rita' });
    await platform.waitForStatus(ORG, evalRun, 'published', 120_000);
    watching = false;
    await watcher;
    await scenario.disarm?.(platform);

    // 1. The read model holds exactly the events on the topic: seqs 1..N, no gaps, no duplicates.
    let topicRecords = 0;
    let distinct = 0;
    for (const runId of [...agents, evalRun]) {
      const [row] = await platform.query<{ last_seq: number; status: string }>('SELECT last_seq, status FROM runs WHERE org = $1 AND run_id = $2', [ORG, runId]);
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
      const stored = await platform.query<{ seq: number; event: RunEventEnvelope }>('SELECT seq, event FROM run_events WHERE org = $1 AND run_id = $2 ORDER BY seq', [ORG, runId]);
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
      const watched = seen.get(runId) ?? [];
      for (let i = 1; i < watched.length; i++) {
        expect(watched[i].state_seq).toBeGreaterThanOrEqual(watched[i - 1].state_seq);
        if (isTerminal(watched[i - 1].status)) expect(watched[i].status).toBe(watched[i - 1].status);
        expect((RANK[watched[i].status] ?? 1) >= (RANK[watched[i - 1].status] ?? 1)).toBe(true);
      }
    }
    if (scenario.expectRepublished) expect(topicRecords).toBeGreaterThan(distinct);

    // 3. Every ledger key has exactly one effect: one per model call and tool step, one per case.
    const effects = async (prefix: string) =>
      Number((await platform.query<{ n: string }>('SELECT count(*) AS n FROM effect_ledger WHERE starts_with(idempotency_key, $1)', [prefix]))[0].n);
    const shape = scriptedRunShape(AGENT_STEPS);
    let effectRows = 0;
    for (const runId of agents) {
      expect(await effects(`${ORG}/${runId}:`)).toBe(shape.effects);
      expect(await effects(`${ORG}/${runId}/research/`)).toBe(shape.research);
      effectRows += shape.effects + shape.research;
      expect(await platform.query('SELECT 1 FROM gpu_leases WHERE org = $1 AND run_id = $2', [ORG, runId])).toEqual([]);
      // The snapshot series survived too: every turn, then the final, each row once.
      const rows = (await platform.query<{ event: RunEventEnvelope }>(`SELECT event FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'snapshot_captured' ORDER BY seq`, [ORG, runId])).map(
        (r) => r.event.payload.snapshot as { snapshot_id: string; turn?: number; is_final: boolean; bundle_object_url?: string },
      );
      expect(rows.filter((r) => r.turn !== undefined).map((r) => r.turn)).toEqual(oneToN(AGENT_STEPS));
      expect(rows[rows.length - 1]).toMatchObject({ is_final: true });
      expect(rows[rows.length - 1].bundle_object_url).toBeDefined();
      const manifest = await platform.query<{ n: string }>('SELECT count(*) AS n FROM snapshots WHERE org = $1 AND run_id = $2', [ORG, runId]);
      expect(Number(manifest[0].n)).toBe(rows.length);
    }
    expect(await effects(`${ORG}/${evalRun}:`)).toBe(EVAL_CASES);
    effectRows += EVAL_CASES;

    // 4. Every command was applied once: one decision each, accepted, and its effect in the run once.
    for (const command of commands) {
      const decided = await platform.query<{ outcome: string }>('SELECT outcome FROM command_ledger WHERE org = $1 AND command_id = $2', [ORG, command.id]);
      expect(decided).toEqual([{ outcome: 'accepted' }]);
      // The test's own consumer may still be catching up after a broker restart.
      await waitFor(`the outcome of ${command.id} on the topic`, () => outcomes.some((o) => o.value.command_id === command.id), 90_000);
      const told = outcomes.filter((o) => o.value.command_id === command.id).map((o) => o.value.outcome);
      expect(told[0]).toBe('accepted');
      expect(told.slice(1).every((o) => o === 'accepted' || o === 'duplicate')).toBe(true);
      if (command.type === 'agent.inject_context' || command.type === 'eval.approve') {
        const applied = await platform.query('SELECT seq FROM run_events WHERE org = $1 AND run_id = $2 AND event->\'payload\'->>\'command_id\' = $3', [ORG, command.run_id, command.id]);
        expect(applied).toHaveLength(1);
      }
    }

    console.log(
      `[faults] ${scenario.name}: runs 3 (2 agents, 1 eval) done; events on the topic ${topicRecords} (${topicRecords - distinct} republished), ` +
        `in the read model ${distinct}; effect rows ${effectRows}, none repeated; commands ${commands.length}, each applied once`,
    );
  });
});
