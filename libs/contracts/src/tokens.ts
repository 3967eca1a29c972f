import { Type, type Static } from '@sinclair/typebox';
import { ORG_PATTERN, RUN_ID_PATTERN } from './names';

/**
 * One piece of a model call's reply as it is written, on `agentrun.run-tokens.v1` keyed by run id.
 * Live only: deltas are never in Temporal history or the read model, and may be lost or repeated (a
 * reader that missed some waits for the step's `step_completed`, which records the whole message).
 * `attempt` is the call's attempt: a retried call's deltas start again at `index` 0 with the new
 * attempt, so a reader drops what it held for an older one. The deltas of one (step, attempt) in
 * `index` order concatenate to the step's final message.
 */
export const RUN_TOKEN_DELTA_SCHEMA = Type.Object(
  {
    org: Type.String({ pattern: ORG_PATTERN }),
    run_id: Type.String({ pattern: RUN_ID_PATTERN }),
    step: Type.Integer({ minimum: 0, maximum: 2_147_483_647, description: 'the step whose model call this reply belongs to' }),
    attempt: Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: "the model call's attempt (1, 2, ...)" }),
    index: Type.Integer({ minimum: 0, maximum: 2_147_483_647, description: 'the place of this delta in the attempt, from 0' }),
    delta: Type.String({ maxLength: 65_536, description: 'the next piece of the reply\'s text' }),
  },
  { $id: 'https://agentrun.dev/schemas/run-token-delta.v1.json', title: 'RunTokenDelta' },
);
export type RunTokenDelta = Static<typeof RUN_TOKEN_DELTA_SCHEMA>;
