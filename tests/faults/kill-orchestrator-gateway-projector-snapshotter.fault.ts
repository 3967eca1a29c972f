/**
 * kill -9 of the orchestrator, the gateway, the projector and the snapshotter, each mid-run and followed
 * by a restart (tests/faults/matrix.ts has the scenarios and their checks). On its own platform only, so
 * it runs in parallel with the other files that are not stack-exclusive.
 */
import { faultSuite } from './matrix';

faultSuite(['kill-orchestrator', 'kill-gateway', 'kill-projector', 'kill-snapshotter']);
