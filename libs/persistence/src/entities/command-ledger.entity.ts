import { Column, Entity, PrimaryColumn } from 'typeorm';

/** Every command id an org ever sent, and the one outcome it got: the at-most-once half of commands. */
@Entity({ name: 'command_ledger' })
export class CommandLedgerRow {
  @PrimaryColumn({ type: 'text' }) org!: string;
  @PrimaryColumn({ name: 'command_id', type: 'text' }) commandId!: string;
  @Column({ type: 'text' }) type!: string;
  @Column({ name: 'run_id', type: 'text' }) runId!: string;
  @Column({ type: 'text', nullable: true }) outcome!: string | null;
  @Column({ type: 'text', nullable: true }) reason!: string | null;
  @Column({ type: 'text', nullable: true }) message!: string | null;
  @Column({ type: 'text', nullable: true }) source!: string | null;
  @Column({ name: 'claimed_at', type: 'timestamptz' }) claimedAt!: Date;
  @Column({ name: 'received_at', type: 'timestamptz' }) receivedAt!: Date;
  @Column({ name: 'decided_at', type: 'timestamptz', nullable: true }) decidedAt!: Date | null;
}
