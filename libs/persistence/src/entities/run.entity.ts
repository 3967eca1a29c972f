import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/** One row per run, rebuilt only from the newest event that carried a state. */
@Entity({ name: 'runs' })
@Index('runs_org_created', ['org', 'createdAt', 'runId'])
@Index('runs_org_status_created', ['org', 'status', 'createdAt', 'runId'])
export class RunRow {
  @PrimaryColumn({ type: 'text' }) org!: string;
  @PrimaryColumn({ name: 'run_id', type: 'text' }) runId!: string;
  @Column({ type: 'text' }) kind!: string;
  @Column({ type: 'text' }) status!: string;
  @Column({ type: 'jsonb' }) state!: Record<string, unknown>;
  @Column({ name: 'state_seq', type: 'integer' }) stateSeq!: number;
  @Column({ name: 'last_seq', type: 'integer' }) lastSeq!: number;
  @Column({ name: 'first_seq', type: 'integer' }) firstSeq!: number;
  @Column({ type: 'text', nullable: true }) model!: string | null;
  @Column({ name: 'parent_run_id', type: 'text', nullable: true }) parentRunId!: string | null;
  @Column({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;
  @Column({ name: 'updated_at', type: 'timestamptz' }) updatedAt!: Date;
}
