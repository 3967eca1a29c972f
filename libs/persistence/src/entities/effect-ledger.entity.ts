import { Column, Entity, PrimaryColumn } from 'typeorm';

/** One row per effect that really happened, keyed by the idempotency key the workflow chose. */
@Entity({ name: 'effect_ledger' })
export class EffectLedgerRow {
  @PrimaryColumn({ name: 'idempotency_key', type: 'text' }) idempotencyKey!: string;
  @Column({ type: 'text' }) effect!: string;
  @Column({ type: 'jsonb' }) result!: unknown;
  @Column({ type: 'integer' }) attempt!: number;
  @Column({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;
}
