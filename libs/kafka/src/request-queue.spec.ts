import { CHECK_PENDING_REQUESTS_INTERVAL_MS, installRequestQueueFix, scheduleCheckPendingRequests, type RequestQueueInternals } from './request-queue';

// kafkajs's own request queue, as its connections make one.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const RequestQueue = require('kafkajs/src/network/requestQueue') as new (options: Record<string, unknown>) => RequestQueueInternals & { destroy(): void };
const ORIGINAL = RequestQueue.prototype.scheduleCheckPendingRequests;

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
const queue = () => new RequestQueue({ maxInFlightRequests: 1, requestTimeout: 30_000, enforceRequestTimeout: false, clientId: 't', broker: 'b:9092', logger: silent });

/** How many times the queue checks itself over `ms` of fake time, after one check to begin with. */
function checksOver(q: RequestQueueInternals, ms: number): number {
  let checks = 0;
  const check = q.checkPendingRequests.bind(q);
  q.checkPendingRequests = () => {
    checks += 1;
    check();
  };
  q.checkPendingRequests();
  jest.advanceTimersByTime(ms);
  return checks - 1;
}

describe('kafkajs request queue scheduling', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it("kafkajs 2.2.4's own scheduling checks an idle queue about once a millisecond (the loop the fix removes)", () => {
    const q = queue();
    q.scheduleCheckPendingRequests = ORIGINAL;
    expect(checksOver(q, 100)).toBeGreaterThanOrEqual(50);
    q.destroy();
  });

  it('fixed: an idle, unthrottled queue arms no timer and checks itself no more', () => {
    const q = queue();
    q.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
    expect(checksOver(q, 10_000)).toBe(0);
    expect(q.throttleCheckTimeoutId).toBeNull();
  });

  it('fixed: a pending request held by the in-flight limit is checked again every interval', () => {
    const q = queue();
    q.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
    q.pending.push({});
    // checkPendingRequests cannot send it (the fake entry has no socket), so keep it pending and count.
    let checks = 0;
    q.checkPendingRequests = () => {
      checks += 1;
      q.scheduleCheckPendingRequests();
    };
    q.scheduleCheckPendingRequests();
    jest.advanceTimersByTime(CHECK_PENDING_REQUESTS_INTERVAL_MS * 5);
    expect(checks).toBe(5);
    q.destroy();
  });

  it('fixed: a throttled queue is checked when the throttle runs out, pending or not, and only one timer is armed', () => {
    for (const pending of [0, 1]) {
      const q = queue();
      q.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
      for (let i = 0; i < pending; i += 1) q.pending.push({});
      q.throttledUntil = Date.now() + 250;
      let checks = 0;
      q.checkPendingRequests = () => {
        checks += 1;
      };
      q.scheduleCheckPendingRequests();
      q.scheduleCheckPendingRequests();
      jest.advanceTimersByTime(249);
      expect({ pending, checks }).toEqual({ pending, checks: 0 });
      jest.advanceTimersByTime(1);
      expect({ pending, checks }).toEqual({ pending, checks: 1 });
      q.destroy();
    }
  });

  it('installs on kafkajs itself once, and refuses a queue class that no longer has the methods', () => {
    installRequestQueueFix();
    installRequestQueueFix();
    expect(RequestQueue.prototype.scheduleCheckPendingRequests).toBe(scheduleCheckPendingRequests);
    RequestQueue.prototype.scheduleCheckPendingRequests = ORIGINAL;
    expect(() => installRequestQueueFix({ prototype: {} as never })).toThrow(/pinned kafkajs 2.2.4 internals moved/);
  });
});
