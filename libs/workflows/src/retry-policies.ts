import type { RetryPolicy } from '@temporalio/workflow';

/** Bad arguments will fail the same way every time: never retried. */
const NEVER_RETRY = ['BadArguments'];

export const MODEL_RETRY: RetryPolicy = {
  initialInterval: '200ms',
  backoffCoefficient: 2,
  maximumInterval: '5s',
  maximumAttempts: 5,
  nonRetryableErrorTypes: NEVER_RETRY,
};

export const TOOL_RETRY: RetryPolicy = {
  initialInterval: '200ms',
  backoffCoefficient: 2,
  maximumInterval: '5s',
  maximumAttempts: 5,
  nonRetryableErrorTypes: NEVER_RETRY,
};

/** Publishing and compensating retry for as long as it takes. */
export const FOREVER: RetryPolicy = { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '10s' };
