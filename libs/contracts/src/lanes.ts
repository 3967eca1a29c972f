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
