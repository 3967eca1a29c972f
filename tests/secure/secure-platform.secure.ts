import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { Kafka, logLevel } from 'kafkajs';
import { Client as PgClient } from 'pg';
import { TOPICS, type CommandOutcome, type RunEventEnvelope } from '@agentrun/contracts';
import { CARRIED_EVENTS_KEY, CARRIED_RESULT_KEY } from '@agentrun/workflows';
import { oneToN, seqsOnTopic } from '../support/invariants';
import { Platform, uniqueId, type TopicRecord } from '../support/platform';
import { scrapeMetrics, total } from '../support/prometheus';
import { kafkaClientOfProperties, pgClientOf, runningStackProfile, secureStack } from '../support/secure-stack';
import { SseClient } from '../support/sse';
import { REPO_ROOT } from '../support/stack-env';
import { waitFor } from '../support/wait';

/**
 * The platform on the stack's secure profile, configured only from the files the profile writes: every
 * service reaches Kafka over SASL_SSL as its own principal (ACLs allow exactly its topics and group),
 * Temporal through the mTLS proxy, Postgres over TLS only. The test's Kafka client is `outside`, the
 * principal an outside system gets: it may write commands and read outcomes and run events, nothing else.
 */
describe('the platform on the secure profile', () => {
  const secure = secureStack();
  // Tools paced (400 ms a call), so the run's later GPU calls are scheduled after its first events are
  // confirmed (until then every event goes by the publishing activity, whose first send opens the
  // orchestrator's TLS and SASL connection), and so carry events for the gpu-worker to publish.
  const platform = new Platform({ TOOL_PACE_TICKS: '4', TOOL_PACE_MS: '100' }, { secure: true });
  let events: TopicRecord<RunEventEnvelope>[];
  let outcomes: TopicRecord<CommandOutcome>[];

  beforeAll(async () => {
    expect(runningStackProfile()).toBe('secure');
    await platform.start();
    events = await platform.follow<RunEventEnvelope>(TOPICS.runEvents);
    outcomes = await platform.follow<CommandOutcome>(TOPICS.commandResults);
  });
  afterAll(() => platform.stop());

  it('a run the outside principal starts over Kafka ends done, with every event on the topic and the SSE stream', async () => {
    const org = 'acme';
    const runId = uniqueId('secure');
    const commandId = uniqueId('c');
    await platform.publishCommand({ command_id: commandId, type: 'agent.start', org, run_id: runId, payload: { goal: 'summarise the workspace', max_steps: 12 } });
    await platform.waitForStatus(org, runId, 'done');
    const [row] = await platform.query<{ last_seq: number }>('SELECT last_seq FROM runs WHERE org = $1 AND run_id = $2', [org, runId]);
    const n = row.last_seq;
    await waitFor('every event on the topic, read as outside', () => seqsOnTopic(events, org, runId).length === n);
    expect(seqsOnTopic(events, org, runId)).toEqual(oneToN(n));
    await waitFor('the accepted outcome, read as outside', () => outcomes.some((o) => o.value.command_id === commandId));
    expect(outcomes.find((o) => o.value.command_id === commandId)?.value.outcome).toBe('accepted');

    const sse = new SseClient(`${platform.gatewayUrl}/runs/${runId}/events`, { 'X-Org': org });
    await sse.finished();
    expect(sse.status).toBe(200);
    expect(sse.events().map((e) => e.seq)).toEqual(oneToN(n));

    // The run's GPU calls that carried events (read from its history): the gpu-worker published them
    // as its own principal (its ACL allows that topic only) and said so in each call's result; a
    // refused send would have answered plainly, and counted a failure.
    const carried = await gpuCarriers(`${org}/${runId}`);
    expect(carried.length).toBeGreaterThan(0);
    const gpu = await scrapeMetrics(platform.ports['gpu-worker']);
    expect({
      published: total(gpu, 'agentrun_run_events_published_total'),
      failures: total(gpu, 'agentrun_run_event_publish_failures_total'),
      calls: carried.filter((c) => c.publishedThrough === c.lastSeq).length,
    }).toEqual({ published: carried.reduce((sum, c) => sum + c.events, 0), failures: 0, calls: carried.length });
  });

  /** The GPU-lane calls of a workflow's executions that carried run events: how many, through which seq, and what each result said. */
  async function gpuCarriers(workflowId: string): Promise<{ events: number; lastSeq: number; publishedThrough?: number }[]> {
    const connection = await Connection.connect(temporalOptions());
    try {
      const client = new Client({ connection, namespace: secure.platform.TEMPORAL_NAMESPACE });
      const out: { events: number; lastSeq: number; publishedThrough?: number }[] = [];
      for await (const execution of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
        const history = await client.workflow.getHandle(workflowId, execution.runId).fetchHistory();
        const results = new Map<string, unknown>();
        for (const e of history.events ?? []) {
          const done = e.activityTaskCompletedEventAttributes;
          if (done?.result?.payloads?.[0]) results.set(String(done.scheduledEventId), defaultPayloadConverter.fromPayload(done.result.payloads[0]));
        }
        for (const e of history.events ?? []) {
          const a = e.activityTaskScheduledEventAttributes;
          if (!a || !a.taskQueue?.name?.endsWith('gpu-tools') || (a.input?.payloads?.length ?? 0) < 2) continue;
          const events = (defaultPayloadConverter.fromPayload(a.input!.payloads!.at(-1)!) as { [CARRIED_EVENTS_KEY]: RunEventEnvelope[] })[CARRIED_EVENTS_KEY];
          const result = results.get(String(e.eventId)) as Record<string, unknown> | undefined;
          const through = result?.[CARRIED_RESULT_KEY];
          out.push({ events: events.length, lastSeq: events.at(-1)!.seq, ...(typeof through === 'number' ? { publishedThrough: through } : {}) });
        }
      }
      return out;
    } finally {
      await connection.close();
    }
  }

  function temporalOptions() {
    const tls = {
      serverRootCACertificate: readFileSync(secure.platform.TEMPORAL_TLS_SERVER_CA_CERT_PATH),
      serverNameOverride: secure.platform.TEMPORAL_TLS_SERVER_NAME,
      clientCertPair: { crt: readFileSync(secure.platform.TEMPORAL_TLS_CLIENT_CERT_PATH), key: readFileSync(secure.platform.TEMPORAL_TLS_CLIENT_KEY_PATH) },
    };
    return { address: secure.platform.TEMPORAL_ADDRESS, tls };
  }

  it('the outside principal is refused when it writes run events, or reads the run-state topic', async () => {
    const outside = new Kafka({ ...kafkaClientOfProperties(secure.outside, 'outside-forger'), logLevel: logLevel.NOTHING, retry: { retries: 0 } });
    const producer = outside.producer({ allowAutoTopicCreation: false });
    await producer.connect();
    try {
      const forged = { run_id: 'any', org: 'acme', seq: 99_999, type: 'status_changed', payload: {} };
      await expect(producer.send({ topic: TOPICS.runEvents, messages: [{ key: 'any', value: JSON.stringify(forged) }] })).rejects.toMatchObject({
        type: 'TOPIC_AUTHORIZATION_FAILED',
      });
    } finally {
      await producer.disconnect();
    }
    const admin = outside.admin();
    await admin.connect();
    try {
      await expect(admin.fetchTopicMetadata({ topics: [TOPICS.runState] })).rejects.toMatchObject({ type: 'TOPIC_AUTHORIZATION_FAILED' });
    } finally {
      await admin.disconnect();
    }
  });

  it('a plaintext Kafka connection is refused', async () => {
    const plain = new Kafka({
      clientId: 'plaintext-probe',
      brokers: secure.outside['bootstrap.servers'].split(','),
      logLevel: logLevel.NOTHING,
      connectionTimeout: 3_000,
      retry: { retries: 0 },
    });
    const admin = plain.admin();
    // The broker reads a plaintext request as a broken TLS handshake and closes the connection.
    await expect(admin.connect().then(() => admin.describeCluster())).rejects.toThrow(/Connection error|closed|ECONNRESET/i);
    await admin.disconnect();
  });

  it('Postgres refuses a connection without TLS', async () => {
    const client = new PgClient({ ...pgClientOf(secure.platform), ssl: false });
    await expect(client.connect()).rejects.toThrow(/no encryption|pg_hba/);
    await client.end().catch(() => undefined);
  });

  it('Temporal refuses a client without the client certificate, and serves one with it', async () => {
    const address = secure.platform.TEMPORAL_ADDRESS;
    const ca = readFileSync(secure.platform.TEMPORAL_TLS_SERVER_CA_CERT_PATH);
    const serverNameOverride = secure.platform.TEMPORAL_TLS_SERVER_NAME;
    const anonymous = Connection.connect({ address, tls: { serverRootCACertificate: ca, serverNameOverride }, connectTimeout: 5_000 }).then(async (c) => {
      try {
        await c.workflowService.getSystemInfo({});
      } finally {
        await c.close();
      }
    });
    // The proxy (nginx, ssl_verify_client on) answers a request without a client certificate with the
    // gRPC status UNAUTHENTICATED (16) and its own message; the SDK's connect wraps it.
    await expect(anonymous).rejects.toMatchObject({
      name: 'ServiceError',
      message: 'Failed to connect to Temporal server',
      cause: { code: 16, details: "a client certificate issued by the stack's CA is required" },
    });
    const clientCertPair = { crt: readFileSync(secure.platform.TEMPORAL_TLS_CLIENT_CERT_PATH), key: readFileSync(secure.platform.TEMPORAL_TLS_CLIENT_KEY_PATH) };
    const trusted = await Connection.connect({ address, tls: { serverRootCACertificate: ca, serverNameOverride, clientCertPair } });
    try {
      await expect(trusted.workflowService.getSystemInfo({})).resolves.toMatchObject({ serverVersion: expect.stringMatching(/^\d+\.\d+/) });
    } finally {
      await trusted.close();
    }
  });

  it('a service given a wrong Kafka password exits at start with one message naming the setting', async () => {
    const env = { ...platform.env('projector'), KAFKA_SASL_PASSWORD_FILE: '', KAFKA_SASL_PASSWORD: 'not-the-password' };
    const child = spawn(process.execPath, [join(REPO_ROOT, 'apps/projector/dist/main.js')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(1);
    expect(output).toMatch(/KAFKA_SASL_PASSWORD/);
  }, 60_000);
});
