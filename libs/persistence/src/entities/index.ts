import { CommandLedgerRow } from './command-ledger.entity';
import { EffectLedgerRow } from './effect-ledger.entity';
import { GpuLeaseRow } from './gpu-lease.entity';
import { RunEventRow } from './run-event.entity';
import { RunRow } from './run.entity';

export { CommandLedgerRow, EffectLedgerRow, GpuLeaseRow, RunEventRow, RunRow };
export const ENTITIES = [RunRow, RunEventRow, CommandLedgerRow, EffectLedgerRow, GpuLeaseRow];
