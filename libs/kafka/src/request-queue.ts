/**
 * kafkajs 2.2.4 keeps every broker connection's request queue polling itself once a millisecond for
 * as long as the connection lives, busy or idle (tulios/kafkajs#1556, still open upstream): after each
 * check of the queue it schedules the next one with `throttledUntil - Date.now()`, which is negative
 * when nothing is throttled, so the timer fires at once and schedules the next. Each of a service's
 * connections (producer, every consumer, admin) spins like that; an idle platform spent most of its
 * CPU there (a CPU profile of the five services at rest, issue 35).
 *
 * The queue needs a timer only while something is waiting on it: a request held back by the broker's
 * throttle or by the in-flight limit (the latter is also checked whenever a request completes), or a
 * throttle still to run out. `installRequestQueueFix` replaces the method that schedules the check with
 * one that arms a timer only then, with the same delays as before.
 *
 * kafkajs is pinned (2.2.4) and this reaches into its request queue; `installRequestQueueFix` fails
 * loudly at startup if that ever moves. The maintained client that replaces kafkajs retires this.
 */

/** The request queue's fields and methods used here, as kafkajs 2.2.4 has them. */
export interface RequestQueueInternals {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: ReturnType<typeof setTimeout> | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

interface RequestQueueClass {
  prototype: RequestQueueInternals & { [FIXED]?: true };
}

/** kafkajs's own interval for re-checking requests held back by the in-flight limit. */
export const CHECK_PENDING_REQUESTS_INTERVAL_MS = 10;

const FIXED = Symbol.for('agentrun.kafkajs.request-queue-fix');

/**
 * The fixed scheduling: a timer only while requests are pending (at the throttle's end, or after the
 * re-check interval) or a throttle is yet to run out; never a second one while one is armed.
 */
export function scheduleCheckPendingRequests(this: RequestQueueInternals): void {
  if (this.throttleCheckTimeoutId) return;
  const untilUnthrottled = this.throttledUntil - Date.now();
  let delay: number;
  if (this.pending.length > 0) delay = untilUnthrottled > 0 ? untilUnthrottled : CHECK_PENDING_REQUESTS_INTERVAL_MS;
  else if (untilUnthrottled > 0) delay = untilUnthrottled;
  else return;
  this.throttleCheckTimeoutId = setTimeout(() => {
    this.throttleCheckTimeoutId = null;
    this.checkPendingRequests();
  }, delay);
}

/** Puts the fixed scheduling on kafkajs's request queue (once per process; later calls do nothing). */
export function installRequestQueueFix(queueClass: RequestQueueClass = kafkajsRequestQueue()): void {
  const proto = queueClass.prototype;
  if (proto[FIXED]) return;
  if (typeof proto.scheduleCheckPendingRequests !== 'function' || typeof proto.checkPendingRequests !== 'function') {
    throw new Error('kafkajs RequestQueue has no scheduleCheckPendingRequests/checkPendingRequests: the pinned kafkajs 2.2.4 internals moved');
  }
  proto.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
  proto[FIXED] = true;
}

/** kafkajs's own RequestQueue class: the very one its connections construct. */
function kafkajsRequestQueue(): RequestQueueClass {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- an internal module without typings
  return require('kafkajs/src/network/requestQueue') as RequestQueueClass;
}
