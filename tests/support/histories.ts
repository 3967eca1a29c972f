import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { Worker, type InjectedSinks } from '@temporalio/worker';
import type { RunEventSinks } from '@agentrun/workflows';
import { REPO_ROOT } from './stack-env';

const FIXTURES = join(REPO_ROOT, 'tests/fixtures/histories');

/**
 * The run-event sinks the workflows call, registered so a replay does not log it as unknown. A replay
 * worker never calls a sink that is not `callDuringReplay`, so this one is never called.
 */
export const REPLAY_SINKS: InjectedSinks<RunEventSinks> = {
  runEvents: {
    publish: { fn: () => undefined, callDuringReplay: false },
    carrying: { fn: () => undefined, callDuringReplay: false },
    landed: { fn: () => undefined, callDuringReplay: false },
  },
};

/**
 * Replays real executions' histories through the current workflow bundle (a change that would break
 * running executions fails here) and, with UPDATE_HISTORY_FIXTURES=1, saves them as fixtures for the
 * unit tier's replay test. Replay needs the original workflow ids, kept in `workflow-ids.json`.
 */
export async function replayHistories(client: Client, entries: { workflowId: string; file: string }[]): Promise<void> {
  const histories = await Promise.all(entries.map(async (e) => ({ workflowId: e.workflowId, history: await client.workflow.getHandle(e.workflowId).fetchHistory() })));
  const bundlePath = join(REPO_ROOT, 'libs/workflows/dist/workflow-bundle.js');
  for await (const result of Worker.runReplayHistories({ workflowBundle: { codePath: bundlePath }, sinks: REPLAY_SINKS }, histories)) {
    if (result.error) throw new Error(`${result.workflowId} does not replay: ${result.error.message}`);
  }
  if (process.env.UPDATE_HISTORY_FIXTURES !== '1') return;
  mkdirSync(FIXTURES, { recursive: true });
  const idsFile = join(FIXTURES, 'workflow-ids.json');
  const ids = existsSync(idsFile) ? (JSON.parse(readFileSync(idsFile, 'utf8')) as Record<string, string>) : {};
  entries.forEach((e, i) => {
    writeFileSync(join(FIXTURES, e.file), temporal.api.history.v1.History.encode(histories[i].history!).finish());
    ids[e.file] = e.workflowId;
  });
  writeFileSync(idsFile, JSON.stringify(ids, null, 2) + '\n');
}
