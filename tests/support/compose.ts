import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { Kafka, logLevel, type Consumer, type Producer } from 'kafkajs';
import { COMMAND_KEY_ID_HEADER, COMMAND_SIGNATURE_HEADER, TOPICS } from '@agentrun/contracts';
import { signRecordValue } from '@agentrun/kafka';
import { followInto, type TopicRecord } from './platform';
import { SseClient } from './sse';
import { REPO_ROOT } from './stack-env';
import { waitFor } from './wait';

const run = promisify(execFile);

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: the compose tier runs from tests/compose/run.sh (npm run test:compose)`);
  return value;
}

/**
 * The compose stack as an outside client sees it: only its 127.0.0.1 published ports (the native
 * stack's port numbers behind AGENTRUN_HOST_PORT_PREFIX), an API token of one org (the apps run in
 * production mode), and the compose command, to restart a service. Everything comes from
 * tests/compose/run.sh, which brings the stack up; nothing here knows which engine runs it.
 */
export class ComposeStack {
  readonly prefix = process.env.AGENTRUN_HOST_PORT_PREFIX ?? '';
  readonly token = required('AGENTRUN_COMPOSE_TOKEN');
  readonly org = required('AGENTRUN_COMPOSE_ORG');
  /** The org's command key: the apps run in production mode, where a command on Kafka must be signed. */
  private readonly commandKey = { id: required('AGENTRUN_COMPOSE_COMMAND_KEY_ID'), key: required('AGENTRUN_COMPOSE_COMMAND_KEY') };
  private readonly composeCmd = required('AGENTRUN_COMPOSE_CMD');
  readonly gatewayUrl = `http://127.0.0.1:${this.port(8080)}`;
  readonly kafka = new Kafka({
    clientId: 'compose-e2e',
    brokers: [`127.0.0.1:${this.port(9092)}`],
    logLevel: logLevel.NOTHING,
    retry: { retries: 10 },
  });
  private producer?: Producer;
  private readonly consumers: Consumer[] = [];

  /** The host port the stack publishes for a native-stack port number. */
  port(native: number): number {
    return Number(`${this.prefix}${native}`);
  }

  get auth(): Record<string, string> {
    return { Authorization: `Bearer ${this.token}` };
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON bodies field by field
  async http(method: string, path: string, options: { body?: unknown; headers?: Record<string, string>; token?: string | null } = {}): Promise<{ status: number; body: any; headers: Headers }> {
    const headers: Record<string, string> = { ...(options.token === null ? {} : { Authorization: `Bearer ${options.token ?? this.token}` }), ...(options.headers ?? {}) };
    let body: string | undefined;
    if (options.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(options.body);
    }
    const res = await fetch(`${this.gatewayUrl}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: keep the text
    }
    return { status: res.status, body: parsed, headers: res.headers };
  }

  async publishCommand(command: Record<string, unknown> & { run_id: string }): Promise<void> {
    if (!this.producer) {
      this.producer = this.kafka.producer({ allowAutoTopicCreation: false });
      await this.producer.connect();
    }
    const value = JSON.stringify(command);
    const headers = { [COMMAND_KEY_ID_HEADER]: this.commandKey.id, [COMMAND_SIGNATURE_HEADER]: signRecordValue(this.commandKey.key, value) };
    await this.producer.send({ topic: TOPICS.commands, messages: [{ key: command.run_id, value, headers }] });
  }

  /** Follows a topic from the beginning; the returned array fills as records arrive. */
  async follow<T>(topic: string): Promise<TopicRecord<T>[]> {
    const consumer = this.kafka.consumer({ groupId: `compose-e2e-follow-${randomBytes(4).toString('hex')}` });
    this.consumers.push(consumer);
    await consumer.connect();
    return followInto<T>(consumer, topic);
  }

  /** A run as GET /runs/{id} gives it (undefined while the projector has not seen it). */
  async runOf(runId: string): Promise<{ status: string; last_seq: number; state: { step?: number } } | undefined> {
    const res = await this.http('GET', `/runs/${runId}`);
    return res.status === 200 ? res.body : undefined;
  }

  async waitForStatus(runId: string, status: string, timeoutMs = 180_000): Promise<void> {
    await waitFor(`run ${runId} to be ${status}`, async () => (await this.runOf(runId))?.status === status, timeoutMs, 250);
  }

  /** The run's workflow as Temporal (on its published port) describes it: RUNNING, COMPLETED, FAILED... */
  async workflowStatus(runId: string): Promise<string> {
    const connection = await Connection.connect({ address: `127.0.0.1:${this.port(7233)}` });
    try {
      const client = new Client({ connection, namespace: 'default' });
      return (await client.workflow.getHandle(`${this.org}/${runId}`).describe()).status.name;
    } finally {
      await connection.close();
    }
  }

  /** Holds a run: `POST /runs/:id/pause` and a wait for `paused` (docs/TESTING.md: hold the run, do not race it). */
  async holdRun(runId: string): Promise<void> {
    await this.control(runId, 'pause');
    await this.waitForStatus(runId, 'paused');
  }

  /** Lets a held run go on. */
  async releaseRun(runId: string): Promise<void> {
    await this.control(runId, 'resume');
  }

  private async control(runId: string, action: 'pause' | 'resume'): Promise<void> {
    const res = await this.http('POST', `/runs/${runId}/${action}`, { body: {} });
    if (res.status !== 202) throw new Error(`${action} of ${runId}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  }

  /** The run's whole SSE stream, from its first event to the server's end of stream. */
  async streamToEnd(runId: string, timeoutMs = 180_000): Promise<SseClient> {
    const client = new SseClient(`${this.gatewayUrl}/runs/${runId}/events`, this.auth);
    await waitFor(`the stream of ${runId} to end`, () => client.ended, timeoutMs, 100);
    return client;
  }

  /** `compose restart SERVICE` with the engine that runs the stack (docker compose or podman-compose). */
  async restart(service: string): Promise<void> {
    await run('bash', ['-c', `${this.composeCmd} restart ${service}`], { cwd: REPO_ROOT, timeout: 120_000 });
  }

  async readyz(native: number): Promise<number> {
    try {
      return (await fetch(`http://127.0.0.1:${this.port(native)}/readyz`)).status;
    } catch {
      return 0;
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.consumers.map((c) => c.disconnect()), this.producer?.disconnect()]);
  }
}
