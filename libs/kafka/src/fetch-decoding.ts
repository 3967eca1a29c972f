import { CompressionCodecs } from 'kafkajs';
import { UndecodableBatchError, kafkaCodec, type KafkaCodec } from './codecs';

/**
 * kafkajs decodes a whole fetch response at once: one record batch it cannot read (a codec it lacks,
 * a batch that inflates past the bound) threw out of the fetch, the consumer crashed, and since the
 * group resumed at the same offset, it crashed again on every restart. Here the Fetch v11 response
 * (what kafkajs 2.2.4 speaks to every broker since Kafka 2.3) is decoded batch by batch: a batch that
 * fails becomes one marker record at the batch's last offset, carrying why and where, so the consumer
 * hands it to its handler like any record, the handler dead-letters it, and the commit moves the
 * partition past the whole batch. The other partitions of the fetch are not touched.
 *
 * kafkajs is pinned (2.2.4) and this reaches into its protocol modules; `installed()` fails loudly at
 * startup if they ever move.
 */

/** Why a batch could not be read, and where it sits. */
export interface UndecodableBatch {
  reason: string;
  /** The batch's first and last offsets (the marker record carries the last). */
  baseOffset: string;
  lastOffset: string;
  /** The codec id of its attributes. */
  codec: number;
  /** The record batch as the broker sent it, when it is at most MAX_KEPT_BATCH_BYTES; else empty. */
  bytes: Buffer;
}

/** A dead-letter record keeps the batch's own bytes up to this size. */
export const MAX_KEPT_BATCH_BYTES = 256 * 1024;

/* The kafkajs internals used here, typed as far as they are used. */
interface Decoder {
  offset: number;
  buffer: Buffer;
  readInt8(): number;
  readInt16(): number;
  readInt32(): number;
  readInt64(): { toString(): string };
  readString(): string;
  readBytes(size?: number): Buffer;
  canReadBytes(size: number): boolean;
  readArray<T>(reader: (d: Decoder) => T): T[];
  readArrayAsync<T>(reader: (d: Decoder) => Promise<T>): Promise<T[]>;
}
type DecoderClass = new (buffer: Buffer) => Decoder;
type RecordBatchDecoder = (decoder: Decoder) => Promise<{ records: unknown[] }>;
type MessageSetDecoder = (decoder: Decoder, size: number) => Promise<unknown[]>;
interface FetchResponseModule {
  decode(raw: Buffer): Promise<unknown>;
  parse: unknown;
}

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs's protocol modules have no typings, and must be the very instances kafkajs uses */
const DecoderImpl = require('kafkajs/src/protocol/decoder') as DecoderClass;
const decodeRecordBatch = require('kafkajs/src/protocol/recordBatch/v0/decoder') as RecordBatchDecoder;
const decodeMessageSet = require('kafkajs/src/protocol/messageSet/decoder') as MessageSetDecoder;
const fetchV11 = require('kafkajs/src/protocol/requests/fetch/v11/response') as FetchResponseModule;
/* eslint-enable @typescript-eslint/no-require-imports */

/** Where the magic byte sits in a record batch (and a legacy message), and the smallest batch header. */
const MAGIC_OFFSET = 16;
const RECORD_BATCH_MAGIC = 2;
const RECORD_BATCH_OVERHEAD = 49;
const ATTRIBUTES_OFFSET = 21;
const LAST_OFFSET_DELTA_OFFSET = 23;
const FIRST_TIMESTAMP_OFFSET = 27;
const PRODUCER_ID_OFFSET = 43;

/** The marker a consumer sees in place of a batch it cannot read. */
export interface UndecodableMarker {
  magicByte: number;
  attributes: number;
  timestamp: string;
  offset: string;
  key: null;
  value: null;
  headers: Record<string, never>;
  isControlRecord: boolean;
  batchContext: Record<string, unknown>;
  undecodable: UndecodableBatch;
}

/** A record batch's header: 61 bytes, from its first offset to its record count. */
const BATCH_HEADER_BYTES = 61;
const TRANSACTIONAL_FLAG = 0x10;
const CONTROL_FLAG = 0x20;

/**
 * The marker for a batch: at its last offset, so committing it moves past the whole batch. A header too
 * short or with a negative offset delta (corrupt) puts the marker at the batch's first offset. The
 * transactional and control flags are kept, so kafkajs filters the marker as it would have filtered
 * the batch (an aborted transaction's batch under read_committed, a control batch).
 */
function markerOf(batch: Buffer, reason: string): UndecodableMarker {
  const base = batch.readBigInt64BE(0);
  const whole = batch.length >= BATCH_HEADER_BYTES;
  const delta = whole ? Math.max(0, batch.readInt32BE(LAST_OFFSET_DELTA_OFFSET)) : 0;
  const last = base + BigInt(delta);
  const attributes = whole ? batch.readInt16BE(ATTRIBUTES_OFFSET) : 0;
  const inTransaction = (attributes & TRANSACTIONAL_FLAG) !== 0;
  const isControlBatch = (attributes & CONTROL_FLAG) !== 0;
  return {
    magicByte: RECORD_BATCH_MAGIC,
    attributes: 0,
    timestamp: whole ? batch.readBigInt64BE(FIRST_TIMESTAMP_OFFSET).toString() : '0',
    offset: last.toString(),
    key: null,
    value: null,
    headers: {},
    isControlRecord: isControlBatch,
    // What kafkajs's aborted-transaction filter reads.
    batchContext: { firstOffset: base.toString(), lastOffsetDelta: delta, producerId: whole ? batch.readBigInt64BE(PRODUCER_ID_OFFSET).toString() : '-1', inTransaction, isControlBatch },
    undecodable: {
      reason,
      baseOffset: base.toString(),
      lastOffset: last.toString(),
      codec: attributes & 0x07,
      bytes: batch.length <= MAX_KEPT_BATCH_BYTES ? Buffer.from(batch) : Buffer.alloc(0),
    },
  };
}

/**
 * A partition's records, batch by batch. A batch cut short at the end of the response (fetch sizes do
 * that) ends the read, as in kafkajs; a whole batch that fails to decode becomes a marker.
 */
export async function decodePartitionRecords(decoder: Decoder): Promise<unknown[]> {
  const size = decoder.readInt32();
  if (size <= 0 || !decoder.canReadBytes(size)) return [];
  const buffer = decoder.readBytes(size);
  if (buffer.length <= MAGIC_OFFSET || buffer.readInt8(MAGIC_OFFSET) !== RECORD_BATCH_MAGIC) return decodeMessageSet(new DecoderImpl(buffer), size);
  const batches = new DecoderImpl(buffer);
  const records: unknown[] = [];
  while (batches.canReadBytes(RECORD_BATCH_OVERHEAD)) {
    const start = batches.offset;
    const length = buffer.readInt32BE(start + 8);
    if (length < BATCH_HEADER_BYTES - 12) {
      // No batch is this short: the header is corrupt, and where the next batch starts cannot be known.
      records.push(markerOf(buffer.subarray(start, Math.min(buffer.length, start + 12 + Math.max(0, length))), `a record batch header with a length of ${length}`));
      break;
    }
    const end = start + 12 + length;
    if (end > buffer.length) break; // the partial batch at the end of a response
    try {
      const batch = await decodeRecordBatch(batches);
      for (const record of batch.records) records.push(record);
    } catch (err) {
      if ((err as Error).name === 'KafkaJSPartialMessageError') break;
      records.push(markerOf(buffer.subarray(start, end), (err as Error).message || String(err)));
    }
    batches.offset = end;
  }
  return records;
}

async function decodeV11Partition(decoder: Decoder) {
  return {
    partition: decoder.readInt32(),
    errorCode: decoder.readInt16(),
    highWatermark: decoder.readInt64().toString(),
    lastStableOffset: decoder.readInt64().toString(),
    lastStartOffset: decoder.readInt64().toString(),
    abortedTransactions: decoder.readArray((d) => ({ producerId: d.readInt64().toString(), firstOffset: d.readInt64().toString() })),
    preferredReadReplica: decoder.readInt32(),
    messages: await decodePartitionRecords(decoder),
  };
}

/** Fetch v11, as kafkajs decodes it, but batch by batch. */
async function decodeFetchV11(raw: Buffer) {
  const decoder = new DecoderImpl(raw);
  const clientSideThrottleTime = decoder.readInt32();
  const errorCode = decoder.readInt16();
  const sessionId = decoder.readInt32();
  const responses = await decoder.readArrayAsync(async (d) => ({ topicName: d.readString(), partitions: await d.readArrayAsync(decodeV11Partition) }));
  // As kafkajs: the broker did not throttle; a client-side throttle time asks the client to wait.
  return { throttleTime: 0, clientSideThrottleTime, errorCode, sessionId, responses };
}

/** A codec id no Kafka defines (5 to 7): its batches are unreadable, not raw. */
function unknownCodec(id: number): KafkaCodec {
  const refuse = async (): Promise<Buffer> => {
    throw new UndecodableBatchError(`codec id ${id} is not a Kafka compression codec`);
  };
  return { compress: refuse, decompress: refuse };
}

let installedLimit: number | undefined;

/**
 * Puts the codecs and the batch-by-batch decoding in place (once per process; the limit is the
 * process's, and the last one given wins). Idempotent.
 */
export function installKafkaDecoding(maxDecompressedBatchBytes: number): void {
  if (installedLimit === maxDecompressedBatchBytes) return;
  installedLimit = maxDecompressedBatchBytes;
  const codecs = CompressionCodecs as unknown as Record<number, () => KafkaCodec>;
  for (const [id, kind] of [
    [1, 'gzip'],
    [2, 'snappy'],
    [3, 'lz4'],
    [4, 'zstd'],
  ] as const) {
    const codec = kafkaCodec(kind, maxDecompressedBatchBytes);
    codecs[id] = () => codec;
  }
  for (const id of [5, 6, 7]) {
    const codec = unknownCodec(id);
    codecs[id] = () => codec;
  }
  if (typeof fetchV11.decode !== 'function' || typeof decodeRecordBatch !== 'function' || typeof DecoderImpl !== 'function') {
    throw new Error('kafkajs protocol modules are not where this version expects them: the batch-by-batch fetch decoding cannot be installed');
  }
  fetchV11.decode = decodeFetchV11;
}

/** The batch a marker stands for, if `message` is one. */
export function undecodableOf(message: unknown): UndecodableBatch | undefined {
  return (message as { undecodable?: UndecodableBatch }).undecodable;
}
