import { loadConfig, kafkaSpec, profileSpec, type Env } from '@agentrun/config';
import { TOPICS } from '@agentrun/contracts';
import { KafkaStartupError, type DescribedTopic } from '@agentrun/kafka';
import { Kafka } from './infrastructure';

const configOf = (env: Env) => loadConfig({ ...kafkaSpec, ...profileSpec }, env);

describe('the Kafka provider', () => {
  it('names the client agentrun-<service> unless KAFKA_CLIENT_ID says otherwise, which is used as it is', () => {
    expect(new Kafka(configOf({}), 'projector').bus.clientId).toBe('agentrun-projector');
    expect(new Kafka(configOf({ KAFKA_CLIENT_ID: 'orders-projector' }), 'projector').bus.clientId).toBe('orders-projector');
  });

  it("uses the service's own consumer group unless KAFKA_GROUP_ID is set, with the topic prefix either way", () => {
    expect(new Kafka(configOf({ AGENTRUN_TOPIC_PREFIX: 't1.' }), 'projector').groupId('agentrun-projector')).toBe('t1.agentrun-projector');
    expect(new Kafka(configOf({ KAFKA_GROUP_ID: 'orders-projector' }), 'projector').groupId('agentrun-projector')).toBe('orders-projector');
  });

  it('checks, before the service starts, the prefixed topics that service uses and stops it when one is missing', async () => {
    const kafka = new Kafka(configOf({ AGENTRUN_TOPIC_PREFIX: 't1.', KAFKA_TOPIC_PARTITIONS: '3', KAFKA_REPLICATION_FACTOR: '1', KAFKA_MIN_INSYNC_REPLICAS: '1' }), 'projector');
    const asked: string[][] = [];
    const present: DescribedTopic[] = [
      { name: `t1.${TOPICS.runEvents}`, partitions: 3, replicationFactor: 1, configs: null, overrides: {} },
      { name: `t1.${TOPICS.runEventsDlq}`, partitions: 3, replicationFactor: 1, configs: null, overrides: {} },
    ];
    jest.spyOn(kafka.bus, 'describeTopics').mockImplementation(async (names) => (asked.push(names), present));
    const failure = kafka.onModuleInit();
    await expect(failure).rejects.toBeInstanceOf(KafkaStartupError);
    await expect(failure).rejects.toThrow(`t1.${TOPICS.runState}: missing`);
    expect(asked).toEqual([[`t1.${TOPICS.runEvents}`, `t1.${TOPICS.runEventsDlq}`, `t1.${TOPICS.runState}`]]);
  });

  it('a process that runs part of its service checks only the topics it was given', async () => {
    const kafka = new Kafka(configOf({ KAFKA_TOPIC_PARTITIONS: '3', KAFKA_REPLICATION_FACTOR: '1', KAFKA_MIN_INSYNC_REPLICAS: '1' }), 'orchestrator', [TOPICS.runEvents]);
    const present: DescribedTopic[] = [{ name: TOPICS.runEvents, partitions: 3, replicationFactor: 1, configs: null, overrides: {} }];
    const describeTopics = jest.spyOn(kafka.bus, 'describeTopics').mockResolvedValue(present);
    await kafka.onModuleInit();
    expect(describeTopics).toHaveBeenCalledWith([TOPICS.runEvents]);
  });

  it('with KAFKA_TOPICS_CHECK=false only makes sure it can connect', async () => {
    const kafka = new Kafka(configOf({ KAFKA_TOPICS_CHECK: 'false' }), 'orchestrator');
    const describeTopics = jest.spyOn(kafka.bus, 'describeTopics').mockResolvedValue([]);
    await kafka.onModuleInit();
    expect(describeTopics).toHaveBeenCalledWith([]);
  });
});
