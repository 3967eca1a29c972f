/**
 * @stack-exclusive
 *
 * The shared stack's servers: a restart of Kafka, of Temporal and of Postgres, and Postgres paused
 * (SIGSTOP) longer than the activity timeouts, each mid-run (tests/faults/matrix.ts). They disturb every
 * platform on the stack, so this file runs alone, after the files that run in parallel.
 */
import { faultSuite } from './matrix';

faultSuite(['restart-kafka', 'restart-temporal', 'restart-postgres', 'pause-postgres']);
