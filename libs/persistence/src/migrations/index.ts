import { ReadModel1764400000000 } from './1764400000000-read-model';
import { CommandLedgerClaims1764500000000 } from './1764500000000-command-ledger-claims';
import { GpuLeases1764600000000 } from './1764600000000-gpu-leases';
import { ApiTokens1764700000000 } from './1764700000000-api-tokens';
import { Snapshots1764800000000 } from './1764800000000-snapshots';
import { Evals1764900000000 } from './1764900000000-evals';
import { CommandKeys1765000000000 } from './1765000000000-command-keys';
import { WebSessions1765100000000 } from './1765100000000-web-sessions';
import { LedgerRecentStarts1765200000000 } from './1765200000000-ledger-recent-starts';
import { RunEventTraceparent1765300000000 } from './1765300000000-run-event-traceparent';
import { ModelUsage1765400000000 } from './1765400000000-model-usage';
import { Budgets1765500000000 } from './1765500000000-budgets';
import { RateLimits1765600000000 } from './1765600000000-rate-limits';
import { RateLimitBucketLevels1765700000000 } from './1765700000000-rate-limit-bucket-levels';

export const MIGRATIONS = [ReadModel1764400000000, CommandLedgerClaims1764500000000, GpuLeases1764600000000, ApiTokens1764700000000, Snapshots1764800000000, Evals1764900000000, CommandKeys1765000000000, WebSessions1765100000000, LedgerRecentStarts1765200000000, RunEventTraceparent1765300000000, ModelUsage1765400000000, Budgets1765500000000, RateLimits1765600000000, RateLimitBucketLevels1765700000000];
