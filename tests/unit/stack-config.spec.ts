import { SEARCH_ATTRIBUTES, TOPICS } from '@agentrun/contracts';
import { stackEnv } from '../support/stack-env';

describe('the local stack creates what the contracts name', () => {
  const env = stackEnv();

  it('every topic, and only those', () => {
    expect(env.KAFKA_TOPICS.split(/\s+/).sort()).toEqual(Object.values(TOPICS).sort());
  });

  it('every search attribute with its type', () => {
    const declared = Object.fromEntries(env.TEMPORAL_SEARCH_ATTRIBUTES.split(/\s+/).map((pair) => pair.split('=')));
    expect(declared).toEqual(SEARCH_ATTRIBUTES);
  });

  it('tests get at least three partitions per topic', () => {
    expect(Number(env.KAFKA_TOPIC_PARTITIONS)).toBeGreaterThanOrEqual(3);
  });
});
