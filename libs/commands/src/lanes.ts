import { TASK_QUEUES } from '@agentrun/contracts';
import type { Lanes } from '@agentrun/workflows';

/** Task queue names with the deployment's prefix (empty in production; unique per test). */
export function lanesFor(prefix: string): Lanes & { gpuEval: string; snapshots: string } {
  return {
    agentWorkflows: prefix + TASK_QUEUES.agentWorkflows,
    cpuTools: prefix + TASK_QUEUES.cpuTools,
    gpuTools: prefix + TASK_QUEUES.gpuTools,
    gpuEval: prefix + TASK_QUEUES.gpuEval,
    snapshots: prefix + TASK_QUEUES.snapshots,
  };
}
