/**
 * Fault points: named places where the fault suite makes a process fail the way real ones do (a crash
 * between two writes, an acknowledgement that never arrives). Armed only by `AGENTRUN_FAULTS` under
 * the test profile, so a production process never honours them whatever its environment says.
 *
 *   AGENTRUN_FAULTS="projector.crash_after_apply=3,publish.lose_ack_every=4"
 *
 * `name=N` fires on the Nth hit for `*_after_*` points (once) and on every Nth hit for `*_every` points.
 */
export class FaultPoints {
  private readonly armed = new Map<string, number>();
  private readonly hits = new Map<string, number>();

  constructor(spec: string, profile: 'production' | 'test') {
    if (profile !== 'test' || spec.trim() === '') return;
    for (const part of spec.split(',')) {
      const [name, value] = part.split('=').map((s) => s.trim());
      const n = Number(value);
      if (!name || !Number.isInteger(n) || n < 1) throw new Error(`AGENTRUN_FAULTS: '${part}' is not name=N with N >= 1`);
      this.armed.set(name, n);
    }
  }

  /** Counts a pass through `name`; true when the fault should happen now. */
  hit(name: string): boolean {
    const n = this.armed.get(name);
    if (n === undefined) return false;
    const count = (this.hits.get(name) ?? 0) + 1;
    this.hits.set(name, count);
    return name.endsWith('_every') ? count % n === 0 : count === n;
  }

  get active(): boolean {
    return this.armed.size > 0;
  }
}

export const noFaults = new FaultPoints('', 'production');
