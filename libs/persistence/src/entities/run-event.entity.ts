import { Column, Entity, PrimaryColumn } from 'typeorm';

/** Every event exactly once: the key is `(org, run_id, seq)`, so a replay inserts nothing. */
@Entity({ name: 'run_events' })
export class RunEventRow {
  @PrimaryColumn({ type: 'text' }) org!: string;
  @PrimaryColumn({ name: 'run_id', type: 'text' }) runId!: string;
  @PrimaryColumn({ type: 'integer' }) seq!: number;
  @Column({ type: 'text' }) type!: string;
  @Column({ type: 'timestamptz' }) ts!: Date;
  @Column({ type: 'jsonb' }) event!: Record<string, unknown>;
  @Column({ name: 'projected_at', type: 'timestamptz' }) projectedAt!: Date;
}
