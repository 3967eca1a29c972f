// The platform's Kafka topics, as declared in libs/kafka (platformTopicSpecs):
//   npm run topics -- apply   create missing topics, raise partition counts, set differing configs
//   npm run topics -- check   list every difference from the declared specs; exit 1 when there is any
// Reads the services' own settings (KAFKA_BROKERS, KAFKA_SECURITY_PROTOCOL, KAFKA_SASL_*, KAFKA_SSL_*,
// KAFKA_TOPIC_PARTITIONS, KAFKA_REPLICATION_FACTOR, KAFKA_MIN_INSYNC_REPLICAS, KAFKA_RETENTION_MS,
// AGENTRUN_TOPIC_PREFIX). Needs the built libs (`npm run build`).
const path = require('node:path');

const USAGE = `usage: node tools/topics.js apply|check
  apply   make the cluster match the declared topics (idempotent; never lowers partitions or changes replication)
  check   report every difference from the declared topics; exit 1 when there is any`;

function loadLibs() {
  try {
    return {
      config: require(path.resolve(__dirname, '../libs/config/dist')),
      kafka: require(path.resolve(__dirname, '../libs/kafka/dist')),
    };
  } catch (err) {
    throw new Error(`the built libs are missing (${err.message}): run npm run build first`);
  }
}

function describeSpec(spec) {
  const configs = Object.entries(spec.configs).map(([k, v]) => `${k}=${v}`).join(' ');
  return `${spec.name}: ${spec.partitions} partitions, replication factor ${spec.replicationFactor}, ${configs}`;
}

async function run(command, env, out) {
  const { config: cfg, kafka } = loadLibs();
  const config = cfg.loadConfig(cfg.kafkaSpec, env);
  const specs = kafka.platformTopicSpecs(config, config.AGENTRUN_TOPIC_PREFIX);
  const bus = new kafka.KafkaBus({
    brokers: config.KAFKA_BROKERS,
    clientId: config.KAFKA_CLIENT_ID ?? 'agentrun-topics',
    timings: cfg.kafkaTimings({ AGENTRUN_PROFILE: 'production' }),
    ...kafka.kafkaClientSecurity(config),
  });
  const where = `Kafka at ${config.KAFKA_BROKERS.join(',')}`;
  try {
    if (command === 'check') {
      const differences = kafka.diffTopics(specs, await bus.describeTopics(specs.map((s) => s.name)));
      for (const spec of specs) {
        const own = differences.filter((d) => d.topic === spec.name);
        if (own.length === 0) out(`ok        ${describeSpec(spec)}`);
        for (const d of own) out(`differs   ${kafka.describeDifference(d)}`);
      }
      out(differences.length ? `${where}: ${differences.length} difference(s); run \`npm run topics -- apply\`` : `${where}: every topic is as declared`);
      return differences.length ? 1 : 0;
    }
    const report = await kafka.applyTopics(bus, specs);
    for (const name of report.created) out(`created   ${describeSpec(specs.find((s) => s.name === name))}`);
    for (const r of report.partitionsRaised) out(`raised    ${r.topic}: partitions ${r.from} -> ${r.to}`);
    for (const c of report.configsChanged) out(`altered   ${c.topic}: ${c.config} ${c.from ?? '(unset)'} -> ${c.to}`);
    for (const d of report.remaining) out(`remains   ${kafka.describeDifference(d)}`);
    const changed = report.created.length + report.partitionsRaised.length + report.configsChanged.length;
    out(`${where}: ${changed ? `${changed} change(s) applied` : 'nothing to change'}${report.remaining.length ? `, ${report.remaining.length} difference(s) apply cannot fix` : ''}`);
    return report.remaining.length ? 1 : 0;
  } catch (err) {
    if (err instanceof cfg.ConfigError) throw err;
    throw new Error(kafka.explainKafkaFailure(err, config.KAFKA_BROKERS, config));
  } finally {
    await bus.close();
  }
}

async function main() {
  const command = process.argv[2];
  if ((command !== 'apply' && command !== 'check') || process.argv.length > 3) {
    process.stderr.write(`topics: ${command ? `unknown command ${process.argv.slice(2).join(' ')}` : 'no command given'}\n${USAGE}\n`);
    return 2;
  }
  try {
    return await run(command, process.env, (line) => process.stdout.write(`${line}\n`));
  } catch (err) {
    process.stderr.write(`topics: ${err.message}\n`);
    return 1;
  }
}

main().then((code) => process.exit(code));
