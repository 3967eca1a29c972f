import { int, loadConfig, str, platformSpec, type ConfigOf } from '@agentrun/config';

export const gpuWorkerSpec = {
  ...platformSpec,
  GPU_WORKER_HOST: str('127.0.0.1'),
  GPU_WORKER_PORT: int(8082, 1, 65535),
  /** Activities this worker runs at once: the GPU slots it has. */
  GPU_SLOTS: int(2, 1, 64),
};
export type GpuWorkerConfig = ConfigOf<typeof gpuWorkerSpec>;
export const loadGpuWorkerConfig = () => loadConfig(gpuWorkerSpec);
