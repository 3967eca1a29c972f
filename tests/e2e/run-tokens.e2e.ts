import { TOPICS, type RunEventEnvelope, type RunTokenDelta } from '@agentrun/contracts';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { SseClient } from '../support/sse';
import { waitFor } from '../support/wait';

/**
 * Token streaming against the real servers: an `llm` run's model calls stream (the local model server
 * writes each reply in word-sized chunks, `[pace:N]` ms apart), the orchestrator sends the deltas to
 * `agentrun.run-tokens.v1`, and the gateway passes them to the run's SSE stream as `token` frames
 * without an id. Nothing of them reaches the read model; the step's event records the whole reply.
 */
describe('token streaming', () => {
  const platform = new Platform({ TOOL_PACE_TICKS: '2', TOOL_PACE_MS: '100' });
  const org = 'streams';
  let tokens: TopicRecord<RunTokenDelta>[];

  beforeAll(async () => {
    await platform.start();
    tokens = await platform.follow<RunTokenDelta>(TOPICS.runTokens);
  });
  afterAll(() => platform.stop());

  const stepsOf = async (runId: string) =>
    (await platform.query<{ event: RunEventEnvelope }>(`SELECT event FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'step_completed' ORDER BY seq`, [org, runId])).map(
      (r) => r.event.payload as { step: number; kind: string; attempt: number; output: string },
    );
  /** The text of the newest attempt of one step, from deltas in index order (a repeat counted once). */
  const textOf = (deltas: Pick<RunTokenDelta, 'step' | 'attempt' | 'index' | 'delta'>[], step: number) => {
    const mine = deltas.filter((d) => d.step === step);
    const attempt = Math.max(...mine.map((d) => d.attempt));
    const byIndex = new Map(mine.filter((d) => d.attempt === attempt).map((d) => [d.index, d.delta]));
    expect([...byIndex.keys()].sort((a, b) => a - b)).toEqual([...byIndex.keys()].map((_, i) => i));
    return { attempt, text: [...byIndex.entries()].sort((a, b) => a[0] - b[0]).map(([, d]) => d).join('') };
  };
  const startRun = async (goal: string, maxSteps: number) => {
    const runId = uniqueId('tok');
    const started = await platform.http('POST', '/agents', { org, body: { run_id: runId, goal, max_steps: maxSteps, policy: 'llm' } });
    expect(started.status).toBe(202);
    await waitFor('the run in the read model', async () => (await platform.http('GET', `/runs/${runId}`, { org })).status === 200, 30_000);
    return runId;
  };

  it("a step's deltas, from the topic and from the SSE stream, concatenate to the reply its event records", async () => {
    const runId = await startRun('[scenario:agent] [pace:15] find the parser notes', 8);
    // Deltas are live only: the run is held paused until the stream is open, so the stream is open
    // before the last answer starts however fast the steps before it are.
    await platform.holdRun(org, runId);
    const stream = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': org });
    try {
      await waitFor('the stream open', () => stream.status === 200, 30_000);
      await platform.releaseRun(org, runId);
      await platform.waitForStatus(org, runId, 'done');
      await waitFor('the end of the stream', () => stream.ended, 30_000);
      const answers = (await stepsOf(runId)).filter((s) => s.kind === 'llm' && !s.output.startsWith('called '));
      expect(answers.length).toBeGreaterThanOrEqual(1);
      const topicOf = () => tokens.filter((r) => r.key === runId).map((r) => r.value);
      // Every delta is acknowledged before its step's event exists; this reader may still be behind.
      const last = answers[answers.length - 1];
      await waitFor('the last reply on the topic', () => topicOf().filter((d) => d.step === last.step).map((d) => d.delta).join('').length >= last.output.length, 30_000);
      const onTopic = topicOf();
      expect(onTopic.every((d) => d.org === org && d.run_id === runId)).toBe(true);
      const sse = stream.frames.filter((f) => f.event === 'token');
      // No id on a token frame: Last-Event-ID keeps counting seqs.
      expect(sse.every((f) => f.id === undefined)).toBe(true);
      const onStream = sse.map((f) => JSON.parse(f.data) as Omit<RunTokenDelta, 'org'> & { org?: string });
      expect(onStream.every((d) => d.org === undefined && d.run_id === runId)).toBe(true);
      for (const answer of answers) {
        expect(answer.output.length).toBeGreaterThan(0);
        // Several deltas per reply: it streamed, it was not sent whole.
        expect(onTopic.filter((d) => d.step === answer.step).length).toBeGreaterThan(1);
        expect(textOf(onTopic, answer.step)).toEqual({ attempt: answer.attempt, text: answer.output });
      }
      // The stream was open before the last answer started: it has that step's every delta, each once
      // (a repeat is allowed by the contract, after a producer's retry, but none happens on a quiet run).
      expect(textOf(onStream, last.step)).toEqual({ attempt: last.attempt, text: last.output });
      const lastOnStream = onStream.filter((d) => d.step === last.step && d.attempt === last.attempt);
      expect(new Set(lastOnStream.map((d) => d.index)).size).toBe(lastOnStream.length);
      // The SSE stream's run events are still 1..N by id; the read model holds no delta.
      const ids = stream.frames.filter((f) => f.id !== undefined).map((f) => Number(f.id));
      expect(ids).toEqual(ids.map((_, i) => i + 1));
      const stored = await platform.query<{ n: string }>("SELECT count(*) AS n FROM run_events WHERE org = $1 AND run_id = $2 AND type = 'token'", [org, runId]);
      expect(Number(stored[0].n)).toBe(0);
      // The run's outcome is in its state once it ended: the answer its run_finished gave.
      const finished = stream.events<{ type: string; payload: { answer?: string } }>().find((e) => e.type === 'run_finished');
      expect(finished?.payload.answer).toEqual(expect.any(String));
      const run = await platform.http('GET', `/runs/${runId}`, { org });
      expect(run.body.state.answer).toBe(finished?.payload.answer);
    } finally {
      stream.close();
    }
  });

  it("a retried call's deltas carry its new attempt, the one its step's event records", async () => {
    // The scripted server answers each conversation's first two calls 500, the third streams.
    const runId = await startRun('[scenario:server_error] find the parser notes', 4);
    await platform.waitForStatus(org, runId, 'done');
    const answers = (await stepsOf(runId)).filter((s) => s.kind === 'llm' && !s.output.startsWith('called '));
    expect(answers.length).toBeGreaterThanOrEqual(1);
    const onTopic = () => tokens.filter((r) => r.key === runId).map((r) => r.value);
    for (const answer of answers) {
      expect(answer.attempt).toBe(3);
      await waitFor(`step ${answer.step}'s deltas`, () => onTopic().some((d) => d.step === answer.step), 30_000);
      expect(textOf(onTopic(), answer.step)).toEqual({ attempt: 3, text: answer.output });
    }
  });
});
