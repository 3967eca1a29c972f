import { Logger } from '@nestjs/common';
import { Client } from '@temporalio/client';
import { Worker, type NativeConnection, type WorkerOptions } from '@temporalio/worker';
import type { TemporalConfig } from '@agentrun/config';
import { checkNamespaceOnce, connectTemporalWorker, temporalConnectionOptions } from './temporal-connection';
import { temporalLogger } from '@agentrun/telemetry';
import { installTemporalRuntime } from './temporal-runtime';
import { logContextInterceptor } from './activity-log-context';
import { failFast } from './fatal';
import type { ReadinessCheck } from './health';
import { workflowClientTracing, withWorkerTracing } from './temporal-tracing';

export type LaneWorkerOptions = Omit<WorkerOptions, 'connection' | 'namespace'>;

/** A lane's interceptors with the run's log context around every activity (after any the lane brings, so their spans are active). */
function withLogContext(interceptors: WorkerOptions['interceptors']): WorkerOptions['interceptors'] {
  return { ...interceptors, activity: [...(interceptors?.activity ?? []), logContextInterceptor] };
}

/** The Temporal workers of one process: started together, checked together, drained together. */
export class WorkerPool implements ReadinessCheck {
  readonly name = 'temporal-workers';
  private readonly logger = new Logger(WorkerPool.name);
  private failure?: Error;
  private stopping = false;
  private readonly running: Promise<void>[];

  private constructor(
    private readonly connection: NativeConnection,
    private readonly workers: Worker[],
    /** The namespace the workers poll. */
    readonly namespace: string,
  ) {
    this.running = workers.map((w) =>
      w.run().then(
        () => {
          if (!this.stopping) failFast(`worker on ${w.options.taskQueue} stopped by itself`);
        },
        (err: Error) => {
          this.failure = err;
          this.logger.error(`worker on ${w.options.taskQueue} stopped: ${err.stack ?? err.message}`);
          failFast(`worker on ${w.options.taskQueue} failed: ${err.message}`);
        },
      ),
    );
    this.logger.log(`polling ${workers.map((w) => w.options.taskQueue).join(', ')}`);
  }

  /** Connects with the service's Temporal settings, checks the namespace, then creates every lane's worker. */
  static async start(config: TemporalConfig, lanes: LaneWorkerOptions[]): Promise<WorkerPool> {
    const options = temporalConnectionOptions(config);
    const namespace = options.namespace;
    // Before the first native connection: the runtime (with its metrics exporter) is made only once.
    // The SDK's own log lines go through the service's logger (JSON with the run, like every other line).
    await installTemporalRuntime({ logger: temporalLogger() });
    const connection = await connectTemporalWorker(options);
    try {
      await checkNamespaceOnce(config, connection, options);
      const workers: Worker[] = [];
      for (const lane of lanes) {
        const traced = withWorkerTracing(lane);
        workers.push(await Worker.create({ ...traced, connection, namespace, interceptors: withLogContext(traced.interceptors) }));
      }
      return new WorkerPool(connection, workers, namespace);
    } catch (err) {
      await connection.close();
      throw err;
    }
  }

  /**
   * A client on the workers' own connection. A start it makes with `requestEagerStart` can hand the new
   * workflow's first task straight to a worker of this pool (the SDK finds one polling the task queue
   * with a free slot, and reserves the slot) instead of through the server's matching and a poll; with
   * no such worker, or a server that declines, the workflow starts as usual.
   */
  client(): Client {
    return new Client({ connection: this.connection, namespace: this.namespace, interceptors: { workflow: workflowClientTracing() } });
  }

  /** The workers' connection's workflow service, for a lane's own reads of Temporal. */
  get workflowService(): NativeConnection['workflowService'] {
    return this.connection.workflowService;
  }

  async check(): Promise<void> {
    if (this.failure) throw this.failure;
    const states = this.workers.map((w) => w.getState());
    if (states.some((s) => s !== 'RUNNING')) throw new Error(`workers are ${states.join(', ')}`);
  }

  /** Stops polling and waits for activities and workflow tasks in flight, then closes the connection. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const worker of this.workers) if (worker.getState() === 'RUNNING') worker.shutdown();
    await Promise.all(this.running);
    await this.connection.close();
  }
}
