import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import type { NativeConnection } from '@temporalio/worker';

type Execution = { workflowId: string; runId: string };

/** Pages of the history read from its end before the watch gives up on finding a scheduled event. */
const MAX_REVERSE_PAGES = 10;
const PAGE_SIZE = 100;

/**
 * The Temporal reads of the stalled-carrier watch (`StalledCarriers` in libs/activities) over a
 * worker's connection: which activities of an execution are scheduled and not started (its
 * description), and the arguments their `ActivityTaskScheduled` events recorded, found by reading the
 * history backwards (a queued call was scheduled recently, so a page or two from the end).
 */
export function temporalCarrierReader(service: NativeConnection['workflowService'], namespace: string) {
  return {
    async queuedActivities(execution: Execution): Promise<string[]> {
      const described = await service.describeWorkflowExecution({ namespace, execution });
      return (described.pendingActivities ?? [])
        .filter((a) => a.state === temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED && a.activityId)
        .map((a) => a.activityId!);
    },

    async scheduledArguments(execution: Execution, activityIds: ReadonlySet<string>): Promise<unknown[][]> {
      const found: unknown[][] = [];
      let nextPageToken: Uint8Array | undefined;
      for (let page = 0; page < MAX_REVERSE_PAGES && found.length < activityIds.size; page += 1) {
        const response = await service.getWorkflowExecutionHistoryReverse({ namespace, execution, maximumPageSize: PAGE_SIZE, nextPageToken });
        for (const event of response.history?.events ?? []) {
          const scheduled = event.activityTaskScheduledEventAttributes;
          if (event.eventType !== temporal.api.enums.v1.EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED || !scheduled?.activityId) continue;
          if (!activityIds.has(scheduled.activityId)) continue;
          // Newest first here; the caller gets them in the order they were scheduled.
          found.unshift((scheduled.input?.payloads ?? []).map((p) => defaultPayloadConverter.fromPayload(p)));
        }
        if (!response.nextPageToken?.length) break;
        nextPageToken = response.nextPageToken;
      }
      return found;
    },
  };
}
