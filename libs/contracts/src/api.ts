import { Type, type Static } from '@sinclair/typebox';
import { RUN_KINDS } from './commands';
import { CASE_RESULT_SCHEMA, CONVERSATION_MESSAGE_SCHEMA, RUN_EVENT_SCHEMA, SNAPSHOT_ROW_SCHEMA, type RunEventEnvelope, type RunStateView } from './events';
import { RUN_ID_PATTERN, SNAPSHOT_ID_PATTERN } from './names';
import { OUTCOMES, REJECTION_REASONS } from './outcomes';
import { AnyObject, Embedded, StringEnum } from './schema';
import { RUN_STATUSES } from './statuses';

/** Shapes the gateway answers with over HTTP, shared by the gateway, its OpenAPI document and the dashboard. */

/** An RFC 9457 problem document: what went wrong, in words a person can act on. */
export const PROBLEM_SCHEMA = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer({ minimum: 400, maximum: 599 }),
    detail: Type.String(),
    /** A rejected command's reason, when a command was refused. */
    reason: Type.Optional(StringEnum(REJECTION_REASONS)),
    /** The refused command's id, when a command was refused. */
    command_id: Type.Optional(Type.String()),
    /**
     * On an unexpected error (a 500): the id the gateway or the command's handler logged the error
     * under, with its detail. The answer says nothing else of the error.
     */
    error_id: Type.Optional(Type.String()),
  },
  { $id: 'https://agentrun.dev/schemas/problem.v1.json', title: 'Problem', additionalProperties: true },
);
export type Problem = Static<typeof PROBLEM_SCHEMA> & { [extension: string]: unknown };

/** What a command route answers with 202: accepted, or a duplicate of a command already accepted (a refusal is a problem). */
export const COMMAND_ACCEPTED_SCHEMA = Type.Object(
  {
    command_id: Type.String(),
    run_id: Type.String({ pattern: RUN_ID_PATTERN }),
    outcome: StringEnum(OUTCOMES.filter((o): o is Exclude<(typeof OUTCOMES)[number], 'rejected'> => o !== 'rejected')),
    message: Type.Optional(Type.String()),
  },
  { $id: 'https://agentrun.dev/schemas/command-accepted.v1.json', title: 'CommandAccepted' },
);
export type CommandAccepted = Static<typeof COMMAND_ACCEPTED_SCHEMA>;

/** One run as the read model lists it. */
export const RUN_SUMMARY_SCHEMA = Type.Object(
  {
    run_id: Type.String({ pattern: RUN_ID_PATTERN }),
    kind: StringEnum(RUN_KINDS),
    status: StringEnum(RUN_STATUSES),
    model: Type.Union([Type.String(), Type.Null()]),
    parent_run_id: Type.Union([Type.String(), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    last_seq: Type.Integer({ minimum: 0 }),
    /** The state of the last event applied (`payload.state`). */
    state: AnyObject<RunStateView>(),
  },
  { $id: 'https://agentrun.dev/schemas/run-summary.v1.json', title: 'RunSummary' },
);
export type RunSummary = Static<typeof RUN_SUMMARY_SCHEMA>;

/** `GET /runs`: newest first; `next_cursor` is null on the last page. */
export const RUNS_PAGE_SCHEMA = Type.Object(
  {
    runs: Type.Array(Embedded(RUN_SUMMARY_SCHEMA)),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'pass as `cursor` for the next page; null on the last' }),
  },
  { $id: 'https://agentrun.dev/schemas/runs-page.v1.json', title: 'RunsPage' },
);
export type RunsPage = Static<typeof RUNS_PAGE_SCHEMA>;

/** `GET /runs/{id}`: the summary and the run's newest events, oldest first. */
export const RUN_DETAIL_SCHEMA = Type.Object(
  { ...RUN_SUMMARY_SCHEMA.properties, last_events: Type.Array(Type.Unsafe<RunEventEnvelope>(Embedded(RUN_EVENT_SCHEMA))) },
  { $id: 'https://agentrun.dev/schemas/run-detail.v1.json', title: 'RunDetail' },
);
export type RunDetail = Static<typeof RUN_DETAIL_SCHEMA>;

/** What `GET /usage` groups by. */
export const USAGE_GROUPS = ['model', 'run', 'day'] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

const USAGE_TOTALS = {
  calls: Type.Integer({ minimum: 0 }),
  prompt_tokens: Type.Integer({ minimum: 0 }),
  completion_tokens: Type.Integer({ minimum: 0 }),
  /** US dollars, from the price table the workers had when each call was made. */
  cost_usd: Type.Number({ minimum: 0 }),
  /** Calls whose tokens were estimated (the server reported none). */
  estimated_calls: Type.Integer({ minimum: 0 }),
  /** Calls of a model the price table had no price for (counted at 0 dollars). */
  unpriced_calls: Type.Integer({ minimum: 0 }),
};

/** `GET /usage`: an org's model calls in `[from, to)`, added up and grouped. */
export const USAGE_REPORT_SCHEMA = Type.Object(
  {
    from: Type.String({ format: 'date-time' }),
    to: Type.String({ format: 'date-time' }),
    group_by: StringEnum(USAGE_GROUPS),
    total: Type.Object(USAGE_TOTALS),
    /** Most expensive first (then by key); `key` is the model, the run id, or the UTC day (`YYYY-MM-DD`). */
    groups: Type.Array(Type.Object({ key: Type.String(), ...USAGE_TOTALS })),
    /** True when there were more groups than the answer holds (`total` still counts them all). */
    truncated: Type.Boolean(),
  },
  { $id: 'https://agentrun.dev/schemas/usage-report.v1.json', title: 'UsageReport' },
);
export type UsageReport = Static<typeof USAGE_REPORT_SCHEMA>;
export type UsageTotals = UsageReport['total'];

/** `GET /runs/{id}/snapshots`: the manifest in the order rows landed. */
export const SNAPSHOT_LIST_SCHEMA = Type.Object(
  { run_id: Type.String({ pattern: RUN_ID_PATTERN }), items: Type.Array(Embedded(SNAPSHOT_ROW_SCHEMA)) },
  { $id: 'https://agentrun.dev/schemas/snapshot-list.v1.json', title: 'SnapshotList' },
);
export type SnapshotList = Static<typeof SNAPSHOT_LIST_SCHEMA>;

/** `GET /runs/{id}/conversation`: an `llm` agent run's messages, from its events, each with the step that added it. */
export const RUN_CONVERSATION_SCHEMA = Type.Object(
  {
    run_id: Type.String({ pattern: RUN_ID_PATTERN }),
    status: StringEnum(RUN_STATUSES),
    /** The run's answer, once it ended with one. */
    answer: Type.Optional(Type.String()),
    messages: Type.Array(Type.Composite([Type.Object({ step: Type.Integer({ minimum: 0 }) }), CONVERSATION_MESSAGE_SCHEMA])),
  },
  { $id: 'https://agentrun.dev/schemas/run-conversation.v1.json', title: 'RunConversation' },
);
export type RunConversation = Static<typeof RUN_CONVERSATION_SCHEMA>;

/** What an entry of a snapshot's workspace archive is. */
export const SNAPSHOT_FILE_TYPES = ['file', 'dir', 'symlink', 'hardlink', 'other'] as const;

/** `GET /runs/{id}/snapshots/{snapshot_id}/files`: a page of the archive's entries, in archive order. */
export const SNAPSHOT_FILE_LIST_SCHEMA = Type.Object(
  {
    run_id: Type.String({ pattern: RUN_ID_PATTERN }),
    snapshot_id: Type.String({ pattern: SNAPSHOT_ID_PATTERN }),
    items: Type.Array(
      Type.Object({
        /** As the archive names it, relative to the workspace, without `./` or a directory's trailing `/`. */
        path: Type.String({ minLength: 1 }),
        type: StringEnum(SNAPSHOT_FILE_TYPES),
        /** A file's bytes (0 for the other types). */
        size: Type.Integer({ minimum: 0 }),
        /** Permission bits as stored (e.g. 420 for 0644). */
        mode: Type.Integer({ minimum: 0 }),
        mtime: Type.String({ format: 'date-time' }),
        /** A link's target. */
        link: Type.Optional(Type.String()),
      }),
    ),
    /** The `after` of the next page; absent on the last page. */
    next_after: Type.Optional(Type.String()),
  },
  { $id: 'https://agentrun.dev/schemas/snapshot-file-list.v1.json', title: 'SnapshotFileList' },
);
export type SnapshotFileList = Static<typeof SNAPSHOT_FILE_LIST_SCHEMA>;

/** `POST /session`: trades an API token for the session cookie (answers 204). */
export const SESSION_REQUEST_SCHEMA = Type.Object({ token: Type.String() }, { additionalProperties: false, title: 'SessionRequest' });
export type SessionRequest = Static<typeof SESSION_REQUEST_SCHEMA>;

/** `POST /datasets` and `GET /datasets`: a dataset an org stored, by name and content hash. */
export const DATASET_SCHEMA = Type.Object(
  {
    id: Type.String({ pattern: '^[0-9a-f]{64}$', description: "sha256 of the cases' canonical JSONL: the same cases have the same id however they arrived" }),
    name: Type.String(),
    origin: StringEnum(['upload', 'inline'] as const),
    case_count: Type.Integer({ minimum: 1 }),
    bytes: Type.Integer({ minimum: 0 }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'https://agentrun.dev/schemas/dataset.v1.json', title: 'Dataset' },
);
export type Dataset = Static<typeof DATASET_SCHEMA>;

export const DATASET_LIST_SCHEMA = Type.Object(
  {
    datasets: Type.Array(Embedded(DATASET_SCHEMA)),
    suites: Type.Array(
      Type.Object({ name: Type.String(), description: Type.String(), solver: Type.String(), scorers: Type.Array(Type.Unknown()), cases: Type.Integer({ minimum: 0 }) }, { additionalProperties: true }),
      { description: 'suites shipped with the platform, named by `dataset: {"name": ...}`' },
    ),
  },
  { $id: 'https://agentrun.dev/schemas/dataset-list.v1.json', title: 'DatasetList' },
);
export type DatasetList = Static<typeof DATASET_LIST_SCHEMA>;

/** `GET /runs/{id}/results`: one finished case of an eval run. */
export const CASE_RESULT_ROW_SCHEMA = Type.Object(
  {
    case_id: Type.String(),
    status: Type.String(),
    score: Type.Union([Type.Number(), Type.Null()]),
    error_type: Type.Union([Type.String(), Type.Null()]),
    attempts: Type.Union([Type.Integer(), Type.Null()]),
    usage: Type.Union([Type.Object({ prompt_tokens: Type.Integer(), completion_tokens: Type.Integer() }), Type.Null()]),
    duration_ms: Type.Union([Type.Integer(), Type.Null()]),
    finished_at: Type.String({ format: 'date-time' }),
    result: Type.Union([Embedded(CASE_RESULT_SCHEMA), Type.Null()], { description: 'input, target, output and scores; null for synthetic cases' }),
  },
  { $id: 'https://agentrun.dev/schemas/case-result-row.v1.json', title: 'CaseResultRow' },
);
export type CaseResultRow = Static<typeof CASE_RESULT_ROW_SCHEMA>;

export const CASE_RESULT_PAGE_SCHEMA = Type.Object(
  {
    run_id: Type.String({ pattern: RUN_ID_PATTERN }),
    cases: Type.Array(Embedded(CASE_RESULT_ROW_SCHEMA)),
    next_after: Type.Union([Type.String(), Type.Null()], { description: 'pass as `after` for the next page (the last case id of this one); null on the last' }),
  },
  { $id: 'https://agentrun.dev/schemas/case-result-page.v1.json', title: 'CaseResultPage' },
);
export type CaseResultPage = Static<typeof CASE_RESULT_PAGE_SCHEMA>;

/** `GET /runs/{id}/compare?with=`: this run (`current`) against another (`baseline`) over the same dataset. */
export const EVAL_COMPARISON_SCHEMA = Type.Object(
  {
    run_id: Type.String(),
    with: Type.String(),
    dataset_id: Type.String(),
    cases: Type.Array(
      Type.Object({
        case_id: Type.String(),
        change: StringEnum(['improved', 'regressed', 'unchanged', 'added', 'removed'] as const),
        current: Type.Union([Type.Number(), Type.Null()]),
        baseline: Type.Union([Type.Number(), Type.Null()]),
        note: Type.Optional(Type.String()),
      }),
    ),
    counts: Type.Record(Type.String(), Type.Integer({ minimum: 0 })),
    /** Cases graded in both runs: the ones the means and the interval are over. */
    paired: Type.Integer({ minimum: 0 }),
    mean_current: Type.Union([Type.Number(), Type.Null()]),
    mean_baseline: Type.Union([Type.Number(), Type.Null()]),
    mean_difference: Type.Union([Type.Number(), Type.Null()], { description: 'current minus baseline, over cases graded in both' }),
    ci95: Type.Union([Type.Tuple([Type.Number(), Type.Number()]), Type.Null()], { description: 'paired bootstrap percentile interval of the mean difference' }),
  },
  { $id: 'https://agentrun.dev/schemas/eval-comparison.v1.json', title: 'EvalComparison' },
);
export type EvalComparison = Static<typeof EVAL_COMPARISON_SCHEMA>;

const FILE_DIFF_ENTRY = Type.Object({ path: Type.String(), type: StringEnum(SNAPSHOT_FILE_TYPES), size: Type.Integer({ minimum: 0 }) });

/** Two workspace archives compared: entries added, removed and changed, with unified diffs of changed text files. */
export const FILE_DIFF_SCHEMA = Type.Object(
  {
    added: Type.Array(FILE_DIFF_ENTRY),
    removed: Type.Array(FILE_DIFF_ENTRY),
    changed: Type.Array(
      Type.Object({
        path: Type.String(),
        /** What differs: `content` (the bytes), `type`, `mode` (permission bits), `link` (a link's target). */
        what: Type.Array(StringEnum(['content', 'type', 'mode', 'link'] as const)),
        before: Type.Composite([FILE_DIFF_ENTRY, Type.Object({ mode: Type.Integer({ minimum: 0 }) })]),
        after: Type.Composite([FILE_DIFF_ENTRY, Type.Object({ mode: Type.Integer({ minimum: 0 }) })]),
        /** A unified diff (`--- a/path`, `+++ b/path`, hunks with 3 lines of context) of a changed text file. */
        diff: Type.Optional(Type.String()),
        /** Why a changed file has no diff: not text, over 256 KiB a side, or past the 4 MiB of text a comparison reads. */
        diff_omitted: Type.Optional(StringEnum(['binary', 'too_large', 'diff_budget'] as const)),
        /** The diff was over 64 KiB and is cut there. */
        diff_truncated: Type.Optional(Type.Literal(true)),
      }),
    ),
    unchanged: Type.Integer({ minimum: 0 }),
  },
  { title: 'FileDiff' },
);

/** `GET /runs/{id}/snapshots/{a}/diff/{b}`: snapshot `a` of the run against snapshot `b` of the run, or of its parent or fork (`?run=`). */
export const SNAPSHOT_DIFF_SCHEMA = Type.Object(
  {
    run_id: Type.String({ pattern: RUN_ID_PATTERN }),
    snapshot_id: Type.String({ pattern: SNAPSHOT_ID_PATTERN }),
    with: Type.Object({ run_id: Type.String({ pattern: RUN_ID_PATTERN }), snapshot_id: Type.String({ pattern: SNAPSHOT_ID_PATTERN }) }),
    files: FILE_DIFF_SCHEMA,
  },
  { $id: 'https://agentrun.dev/schemas/snapshot-diff.v1.json', title: 'SnapshotDiff' },
);
export type SnapshotDiff = Static<typeof SNAPSHOT_DIFF_SCHEMA>;

/** `GET /runs/{id}/diff?with=`: two agent runs of an org lined up by step, and their final workspaces compared. */
export const RUN_DIFF_SCHEMA = Type.Object(
  {
    run_id: Type.String({ pattern: RUN_ID_PATTERN }),
    with: Type.String({ pattern: RUN_ID_PATTERN }),
    /** The first step where the runs did something different (kind, tool) or got a different output; null when none. */
    first_divergent_step: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
    /** Steps both took alike before it (a fork's steps before its fork point are its parent's). */
    steps_shared: Type.Integer({ minimum: 0 }),
    steps: Type.Object({ run: Type.Integer({ minimum: 0 }), with: Type.Integer({ minimum: 0 }) }),
    /** How the two are related, when one is the other's fork. */
    fork: Type.Optional(Type.Object({ parent: Type.String(), child: Type.String(), snapshot_id: Type.String(), step: Type.Integer({ minimum: 0 }) })),
    /** The final snapshots' workspaces compared (`run`'s against `with`'s); null when either has none with an archive. */
    final_files: Type.Union([Type.Object({ snapshots: Type.Object({ run: Type.String(), with: Type.String() }), files: FILE_DIFF_SCHEMA }), Type.Null()]),
  },
  { $id: 'https://agentrun.dev/schemas/run-diff.v1.json', title: 'RunDiff' },
);
export type RunDiff = Static<typeof RUN_DIFF_SCHEMA>;
