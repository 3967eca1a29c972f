import { planTrajectorySegment } from './snapshot.activities';

describe('which events a capture writes to its trajectory segment', () => {
  it('the first capture writes the run from seq 1', () => {
    expect(planTrajectorySegment(undefined, 12)).toEqual({ segment: { first_seq: 1, last_seq: 12 }, write: true });
  });

  it('each later capture writes only the events after the newest segment that landed', () => {
    expect(planTrajectorySegment({ first_seq: 1, last_seq: 12 }, 15)).toEqual({ segment: { first_seq: 13, last_seq: 15 }, write: true });
    expect(planTrajectorySegment({ first_seq: 13, last_seq: 15 }, 16)).toEqual({ segment: { first_seq: 16, last_seq: 16 }, write: true });
  });

  it('a capture with nothing new names the previous segment and writes nothing', () => {
    expect(planTrajectorySegment({ first_seq: 13, last_seq: 15 }, 15)).toEqual({ segment: { first_seq: 13, last_seq: 15 }, write: false });
  });

  it('a run with no events projected yet gets an empty segment, which the next capture starts over from', () => {
    const empty = planTrajectorySegment(undefined, 0);
    expect(empty).toEqual({ segment: { first_seq: 1, last_seq: 0 }, write: true });
    expect(planTrajectorySegment(empty.segment, 0)).toEqual({ segment: { first_seq: 1, last_seq: 0 }, write: false });
    expect(planTrajectorySegment(empty.segment, 4)).toEqual({ segment: { first_seq: 1, last_seq: 4 }, write: true });
  });

  it('summed over a per-turn series, the events written are the run once: linear, not quadratic', () => {
    let after;
    let written = 0;
    for (let end = 3; end <= 300; end += 3) {
      const { segment, write } = planTrajectorySegment(after, end);
      if (write) written += segment.last_seq - segment.first_seq + 1;
      after = segment;
    }
    expect(written).toBe(300);
  });
});
