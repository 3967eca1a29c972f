import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packDirectory, restoreArchive, type ObjectStore } from '@agentrun/archive';
import type { FileWrite } from '@agentrun/workflows';
import { streamText } from './snapshot.activities';
import { Workspace } from './workspace';

/**
 * GPU tools of a run on a workspace host run on the shared GPU lane, away from the workspace: the host
 * packs the workspace into the object store (`stageWorkspace`), the GPU worker restores it into a
 * temporary root, runs the tool there and returns the files the tool wrote (`runStaged`), and the host
 * writes them (`applyWrites`). The writes are part of the recorded result, so a replay re-applies them.
 */

const digestOf = (key: string): string => createHash('sha256').update(key).digest('hex').slice(0, 24);

export function stagingKey(org: string, runId: string, callKey: string): string {
  return `${org}/${runId}/gpu-staging/${digestOf(callKey)}.tar.gz`;
}

function writesKey(org: string, runId: string, callKey: string): string {
  return `${org}/${runId}/gpu-writes/${digestOf(callKey)}.json`;
}

/** Packs the run's workspace into the object store for a GPU call; returns the object's key. */
export async function stageWorkspace(store: ObjectStore, workspaceRoot: string, org: string, runId: string, callKey: string): Promise<{ ref: string; bytes: number }> {
  const workspace = new Workspace(workspaceRoot, org, runId);
  const ref = stagingKey(org, runId, callKey);
  const stored = await store.put(ref, packDirectory(workspace.dir));
  return { ref, bytes: stored.bytes };
}

async function contents(workspace: Workspace): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const file of await workspace.list()) out.set(file, (await readFile(join(workspace.dir, file))).toString('base64'));
  return out;
}

/**
 * Restores a staged workspace into a temporary root, runs `fn` against that root, and returns its result
 * with the files it added or changed (the temporary root is removed afterwards).
 */
export async function runStaged<T>(store: ObjectStore, ref: string, org: string, runId: string, fn: (root: string) => Promise<T>): Promise<{ result: T; writes: FileWrite[] }> {
  const root = await mkdtemp(join(tmpdir(), 'agentrun-gpu-'));
  try {
    const workspace = new Workspace(root, org, runId);
    await restoreArchive(await store.get(ref), workspace.dir, { maxBytes: 2 * 1024 * 1024 * 1024 });
    const before = await contents(workspace);
    const result = await fn(root);
    const after = await contents(workspace);
    const writes: FileWrite[] = [];
    for (const [path, content] of after) if (before.get(path) !== content) writes.push({ path, content_base64: content });
    return { result, writes };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** Small writes travel in the result; larger ones go to the object store and the result keeps the key. */
export async function packWrites(store: ObjectStore, org: string, runId: string, callKey: string, writes: FileWrite[], inlineMaxBytes: number): Promise<{ writes?: FileWrite[]; writes_ref?: string }> {
  if (writes.length === 0) return {};
  const size = writes.reduce((n, w) => n + w.path.length + w.content_base64.length, 0);
  if (size <= inlineMaxBytes) return { writes };
  const ref = writesKey(org, runId, callKey);
  await store.put(ref, Buffer.from(JSON.stringify(writes)));
  return { writes_ref: ref };
}

/** Writes a GPU call's files into the run's workspace on its host. */
export async function applyWrites(store: ObjectStore, workspaceRoot: string, org: string, runId: string, input: { writes?: FileWrite[]; writes_ref?: string }): Promise<number> {
  let writes = input.writes ?? [];
  if (input.writes_ref) writes = JSON.parse(await streamText(await store.get(input.writes_ref))) as FileWrite[];
  const workspace = new Workspace(workspaceRoot, org, runId);
  for (const w of writes) await workspace.write(w.path, Buffer.from(w.content_base64, 'base64'));
  return writes.length;
}
