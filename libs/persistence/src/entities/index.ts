import { CommandLedgerRow } from './command-ledger.entity';
import { EffectLedgerRow } from './effect-ledger.entity';
import { RunEventRow } from './run-event.entity';
import { RunRow } from './run.entity';

export { CommandLedgerRow, EffectLedgerRow, RunEventRow, RunRow };
export const ENTITIES = [RunRow, RunEventRow, CommandLedgerRow, EffectLedgerRow];
