import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A GPU held by one tool call, keyed by the call's idempotency key. */
@Entity({ name: 'gpu_leases' })
export class GpuLeaseRow {
  @PrimaryColumn({ name: 'idempotency_key', type: 'text' }) idempotencyKey!: string;
  @Column({ type: 'text' }) org!: string;
  @Column({ name: 'run_id', type: 'text' }) runId!: string;
  @Column({ type: 'text' }) worker!: string;
  @Column({ name: 'acquired_at', type: 'timestamptz' }) acquiredAt!: Date;
}
