import { Logger } from '@nestjs/common';
import { eventKeyring, FaultPoints, type EventKey } from '@agentrun/config';
import { EventSigner, EventVerifier, type KafkaBus } from '@agentrun/kafka';
import type { Kafka } from './infrastructure';

interface EventKeySettings {
  AGENTRUN_EVENT_KEYS: EventKey[] | undefined;
  AGENTRUN_EVENT_KEY_ID: string | undefined;
}

const logger = new Logger('RunEventKeys');

function keyring(config: EventKeySettings, role: string) {
  const ring = eventKeyring(config);
  // Local mode only (production refuses to start without keys): say so, since it authenticates nothing.
  if (ring.development) logger.warn(`AGENTRUN_EVENT_KEYS is not set: ${role} run events with the built-in development key, which anyone can use (local mode only)`);
  return ring;
}

/** What the publish activity signs with: the key AGENTRUN_EVENT_KEY_ID names (the first key by default). */
export function runEventSigner(config: EventKeySettings): EventSigner {
  const ring = keyring(config, 'signing');
  logger.log(`signing run events with key '${ring.signing.kid}'`);
  return new EventSigner(ring.signing);
}

/**
 * What a process that publishes run events publishes them with (the publishing activity's and the
 * carrying interceptor's dependencies): the service's Kafka, its signing key, and its fault points.
 */
export function runEventPublishing(kafka: Kafka, config: EventKeySettings & { AGENTRUN_FAULTS: string; AGENTRUN_PROFILE: 'production' | 'test' }): { bus: KafkaBus; topicPrefix: string; signer: EventSigner; faults: FaultPoints } {
  return { bus: kafka.bus, topicPrefix: kafka.topicPrefix, signer: runEventSigner(config), faults: new FaultPoints(config.AGENTRUN_FAULTS, config.AGENTRUN_PROFILE) };
}

/** What the projector checks with: every listed key, so a rotation needs no flag day. */
export function runEventVerifier(config: EventKeySettings): EventVerifier {
  const ring = keyring(config, 'verifying');
  logger.log(`verifying run events with keys ${ring.keys.map((k) => `'${k.kid}'`).join(', ')}`);
  return new EventVerifier(ring.keys);
}
