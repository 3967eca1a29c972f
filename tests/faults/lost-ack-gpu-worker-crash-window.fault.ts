/**
 * Lost publish acks (the orchestrator armed from the platform's start with `publish.lose_ack_every=3`,
 * then restarted without it), kill -9 of the GPU worker, and the projector dying between its Postgres
 * commit and its offset commit (`projector.crash_after_apply`), each mid-run (tests/faults/matrix.ts).
 * On its own platform only, so it runs in parallel with the other files that are not stack-exclusive.
 */
import { faultSuite } from './matrix';

faultSuite(['lost-ack', 'kill-gpu-worker', 'crash-window']);
