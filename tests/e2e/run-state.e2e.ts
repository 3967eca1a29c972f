import { TOPICS } from '@agentrun/contracts';
import { ConfigResourceTypes } from 'kafkajs';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { waitFor } from '../support/wait';

interface RunStateValue {
  org: string;
  run_id: string;
  kind: string;
  seq: number;
  type: string;
  status: string;
  ts: string;
  state: { status: string; step?: number };
}

describe('the run-state topic: each run\'s committed state, compacted by run', () => {
  const platform = new Platform();
  let states: TopicRecord<RunStateValue>[];

  beforeAll(async () => {
    await platform.start();
    states = await platform.follow<RunStateValue>(TOPICS.runState);
  });
  afterAll(() => platform.stop());

  const recordsOf = (org: string, runId: string) => states.filter((r) => r.key === `${org}/${runId}`);

  /** The run's newest stored event and its status, as the read model has them. */
  const finalOf = async (org: string, runId: string) => {
    const [row] = await platform.query<{ seq: number; type: string; ts: Date; status: string; state: unknown }>(
      `SELECT e.seq, e.type, e.ts, r.status, e.event->'payload'->'state' AS state
       FROM runs r JOIN run_events e ON e.org = r.org AND e.run_id = r.run_id AND e.seq = r.last_seq
       WHERE r.org = $1 AND r.run_id = $2`,
      [org, runId],
    );
    return row;
  };

  it('is created compacted', async () => {
    const admin = platform.kafka.admin();
    await admin.connect();
    try {
      const { resources } = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: platform.topic(TOPICS.runState), configNames: ['cleanup.policy'] }],
      });
      expect(resources[0].configEntries.map((e) => [e.configName, e.configValue])).toEqual([['cleanup.policy', 'compact']]);
    } finally {
      await admin.disconnect();
    }
  });

  it('after a run finishes, the last record for its key has its final status and seq, and no record goes back in seq', async () => {
    const org = 'acme';
    const runId = uniqueId('state');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'summarise the workspace', max_steps: 4 } });
    await platform.waitForStatus(org, runId, 'done');
    const final = await finalOf(org, runId);

    const last = await waitFor('the final state on the run-state topic', () => {
      const records = recordsOf(org, runId);
      const newest = records[records.length - 1];
      return newest?.value.seq === final.seq && newest;
    });
    expect(last.value).toEqual({
      org,
      run_id: runId,
      kind: 'agent',
      seq: final.seq,
      type: final.type,
      status: 'done',
      ts: final.ts.toISOString(),
      state: final.state,
    });
    expect(last.value.state.status).toBe('done');
    const seqs = recordsOf(org, runId).map((r) => r.value.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  });

  it('a replayed batch does not move a key\'s state backwards', async () => {
    const org = 'acme';
    const runId = uniqueId('replay');
    await platform.publishCommand({ command_id: uniqueId('c'), type: 'agent.start', org, run_id: runId, payload: { goal: 'count the files', max_steps: 3 } });
    await platform.waitForStatus(org, runId, 'done');
    const final = await finalOf(org, runId);
    await waitFor('the final state on the run-state topic', () => recordsOf(org, runId).at(-1)?.value.seq === final.seq);
    const before = recordsOf(org, runId).length;

    // A clean stop leaves the group (its offsets can only be moved then); from the earliest offset
    // the projector applies every batch of the topic again, this run's first events included.
    const group = platform.topic('agentrun-projector');
    expect(await platform.stopApp('projector', 'SIGTERM')).toBe(0);
    const admin = platform.kafka.admin();
    await admin.connect();
    try {
      const committed = await admin.fetchOffsets({ groupId: group, topics: [platform.topic(TOPICS.runEvents)] });
      expect(committed[0].partitions.some((p) => Number(p.offset) > 0)).toBe(true);
      await admin.resetOffsets({ groupId: group, topic: platform.topic(TOPICS.runEvents), earliest: true });
    } finally {
      await admin.disconnect();
    }
    await platform.startApp('projector');

    await waitFor('the replay to publish the run again', () => recordsOf(org, runId).length > before, 60_000);
    const replayed = recordsOf(org, runId).slice(before);
    expect(replayed.map((r) => [r.value.seq, r.value.status])).toEqual(replayed.map(() => [final.seq, 'done']));
    // The read model did not move either.
    expect(await finalOf(org, runId)).toEqual(final);
  });
});
