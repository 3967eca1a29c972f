import { TASK_QUEUES } from './names';

/** A lane: one kind of work with its own task queue and its own workers. */
export type LaneName = keyof typeof TASK_QUEUES;

/** Every lane's task queue name in one deployment. */
export type LaneQueues = Record<LaneName, string>;

/** Task queue names with the deployment's prefix (empty in production; unique per test). */
export function lanesFor(prefix: string): LaneQueues {
  return {
    agentWorkflows: prefix + TASK_QUEUES.agentWorkflows,
    cpuTools: prefix + TASK_QUEUES.cpuTools,
    gpuTools: prefix + TASK_QUEUES.gpuTools,
    gpuEval: prefix + TASK_QUEUES.gpuEval,
    snapshots: prefix + TASK_QUEUES.snapshots,
  };
}

/** A workspace host's name: letters, digits and dashes (it becomes part of task queue names). */
export const WORKSPACE_HOST_PATTERN = '^[a-z0-9][a-z0-9-]{0,31}$';

/**
 * The lanes whose work reads or writes a run's workspace: on a workspace host, each has the host's own
 * queue. GPU tools are not among them: they stay on the shared GPU lane and get the workspace staged.
 */
export interface HostLanes {
  cpuTools: string;
  snapshots: string;
}

/**
 * A workspace host's own task queues (`cpu-tools@h1`, `snapshots@h1`): every activity that touches a
 * run's workspace goes to the queues of the host that holds it. Work that needs no files (model calls,
 * GPU tools on a staged copy) stays on the shared lanes (`lanesFor`).
 */
export function hostLanesFor(prefix: string, host: string): HostLanes {
  return {
    cpuTools: `${prefix}${TASK_QUEUES.cpuTools}@${host}`,
    snapshots: `${prefix}${TASK_QUEUES.snapshots}@${host}`,
  };
}

/**
 * Where a workspace lane's worker polls: the host's own queue on a workspace host, the shared lane on a
 * shared volume (no host).
 */
export function workspaceQueueFor(prefix: string, host: string | undefined, lane: keyof HostLanes): string {
  return host ? hostLanesFor(prefix, host)[lane] : lanesFor(prefix)[lane];
}
