import { randomBytes } from 'node:crypto';
import { CompressionTypes } from 'kafkajs';
import { installKafkaDecoding, decodePartitionRecords, undecodableOf, MAX_KEPT_BATCH_BYTES } from './fetch-decoding';

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs's own encoders make the batches a broker would send */
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0') as { RecordBatch: (b: Record<string, unknown>) => Promise<{ buffer: Buffer }> };
const Record = require('kafkajs/src/protocol/recordBatch/record/v0') as (r: Record<string, unknown>) => unknown;
const Encoder = require('kafkajs/src/protocol/encoder') as new () => {
  buffer: Buffer;
  writeInt16(v: number): unknown;
  writeInt32(v: number): unknown;
  writeInt64(v: number): unknown;
  writeString(v: string): unknown;
  writeBuffer(v: Buffer): unknown;
};
const Decoder = require('kafkajs/src/protocol/decoder') as new (b: Buffer) => never;
const fetchV11 = require('kafkajs/src/protocol/requests/fetch/v11/response') as { decode(raw: Buffer): Promise<{ responses: { topicName: string; partitions: { partition: number; messages: Message[] }[] }[] }> };
/* eslint-enable @typescript-eslint/no-require-imports */

interface Message {
  offset: string;
  value: Buffer | null;
}

const MIB = 1024 * 1024;

async function batch(firstOffset: number, values: (string | Buffer)[], compression = CompressionTypes.None): Promise<Buffer> {
  const records = values.map((value, i) => Record({ offsetDelta: i, key: Buffer.from('k'), value: Buffer.from(value) }));
  return (await RecordBatch({ compression, firstOffset, lastOffsetDelta: values.length - 1, records })).buffer;
}

/** A partition's record set as a fetch response carries it: its size, then the batches. */
function recordSet(batches: Buffer[]): Buffer {
  const body = Buffer.concat(batches);
  const size = Buffer.alloc(4);
  size.writeInt32BE(body.length);
  return Buffer.concat([size, body]);
}

/** The compressed records of a batch made unreadable (the CRC is not checked by the client, so only the codec notices). */
function corrupt(batch: Buffer): Buffer {
  const copy = Buffer.from(batch);
  for (let i = 65; i < copy.length; i++) copy[i] ^= 0x5a;
  return copy;
}

describe('batch-by-batch fetch decoding', () => {
  beforeAll(() => installKafkaDecoding(MIB));

  it('reads records of every codec in one record set', async () => {
    const set = recordSet([
      await batch(0, ['plain']),
      await batch(1, ['gzip'], CompressionTypes.GZIP),
      await batch(2, ['snappy', 'snappy 2'], CompressionTypes.Snappy),
      await batch(4, ['lz4'], CompressionTypes.LZ4),
      await batch(5, ['zstd'], CompressionTypes.ZSTD),
    ]);
    const records = (await decodePartitionRecords(new Decoder(set))) as Message[];
    expect(records.map((r) => [r.offset, r.value?.toString()])).toEqual([
      ['0', 'plain'],
      ['1', 'gzip'],
      ['2', 'snappy'],
      ['3', 'snappy 2'],
      ['4', 'lz4'],
      ['5', 'zstd'],
    ]);
    expect(records.some((r) => undecodableOf(r))).toBe(false);
  });

  it('turns a batch it cannot read into one marker at the batch\'s last offset, and reads the batches around it', async () => {
    const bad = corrupt(await batch(1, ['x'.repeat(500), 'y'.repeat(500), 'z'], CompressionTypes.ZSTD));
    const set = recordSet([await batch(0, ['before']), bad, await batch(4, ['after'], CompressionTypes.LZ4)]);
    const records = (await decodePartitionRecords(new Decoder(set))) as Message[];
    expect(records.map((r) => r.offset)).toEqual(['0', '3', '4']);
    const marker = undecodableOf(records[1]);
    expect(marker).toMatchObject({ baseOffset: '1', lastOffset: '3', codec: 4, reason: expect.stringMatching(/^zstd: /) });
    expect(marker?.bytes.equals(bad)).toBe(true);
    expect(records[1].value).toBeNull();
    expect(records[2].value?.toString()).toBe('after');
  });

  it('refuses a batch over the bound, and keeps no bytes of a batch over MAX_KEPT_BATCH_BYTES', async () => {
    const bomb = await batch(0, [Buffer.alloc(3 * MIB, 'a')], CompressionTypes.ZSTD);
    const big = corrupt(await batch(1, [randomBytes(MAX_KEPT_BATCH_BYTES + 10)], CompressionTypes.GZIP));
    const records = (await decodePartitionRecords(new Decoder(recordSet([bomb, big])))) as Message[];
    expect(undecodableOf(records[0])?.reason).toMatch(/(inflates|may inflate) to \d{7} bytes.* over the 1048576-byte limit/);
    expect(undecodableOf(records[1])).toMatchObject({ lastOffset: '1', reason: expect.stringMatching(/^gzip: /) });
    expect(undecodableOf(records[1])?.bytes).toHaveLength(0);
  });

  it('puts a batch with a corrupt header at its first offset and reads no further; keeps a transactional batch\'s flag', async () => {
    const good = await batch(0, ['good']);
    const short = Buffer.alloc(30);
    short.writeBigInt64BE(5n, 0);
    short.writeInt32BE(18, 8); // shorter than any batch header
    let records = (await decodePartitionRecords(new Decoder(recordSet([good, short, await batch(9, ['unreached'])])))) as Message[];
    expect(records.map((r) => r.offset)).toEqual(['0', '5']);
    expect(undecodableOf(records[1])).toMatchObject({ baseOffset: '5', lastOffset: '5', reason: 'a record batch header with a length of 18' });
    const transactional = corrupt(Buffer.from((await RecordBatch({ compression: CompressionTypes.ZSTD, firstOffset: 3, lastOffsetDelta: 1, transactional: true, records: [Record({ offsetDelta: 0, value: Buffer.from('a') }), Record({ offsetDelta: 1, value: Buffer.from('b') })] })).buffer));
    records = (await decodePartitionRecords(new Decoder(recordSet([transactional])))) as Message[];
    expect(records).toHaveLength(1);
    expect((records[0] as unknown as { batchContext: { inTransaction: boolean } }).batchContext.inTransaction).toBe(true);
    expect(undecodableOf(records[0])).toMatchObject({ baseOffset: '3', lastOffset: '4' });
  });

  it('stops at a batch cut short by the fetch size, as kafkajs does, without a marker', async () => {
    const whole = await batch(0, ['whole']);
    const cut = (await batch(1, ['cut short'], CompressionTypes.ZSTD)).subarray(0, 40);
    const records = (await decodePartitionRecords(new Decoder(recordSet([whole, cut])))) as Message[];
    expect(records.map((r) => r.offset)).toEqual(['0']);
  });

  it('is what kafkajs decodes a Fetch v11 response with: one partition\'s bad batch leaves the other partition whole', async () => {
    const response = new Encoder();
    response.writeInt32(0); // throttle time
    response.writeInt16(0); // error code
    response.writeInt32(0); // session id
    response.writeInt32(1); // topics
    response.writeString('agentrun.commands.v1');
    response.writeInt32(2); // partitions
    const partitions = [
      { partition: 0, set: recordSet([corrupt(await batch(7, ['bad'], CompressionTypes.Snappy))]) },
      { partition: 1, set: recordSet([await batch(3, ['good'], CompressionTypes.ZSTD)]) },
    ];
    for (const { partition, set } of partitions) {
      response.writeInt32(partition);
      response.writeInt16(0);
      response.writeInt64(10); // high watermark
      response.writeInt64(10); // last stable offset
      response.writeInt64(0); // log start offset
      response.writeInt32(0); // aborted transactions
      response.writeInt32(-1); // preferred read replica
      response.writeBuffer(set); // the record set, its size first
    }
    const decoded = await fetchV11.decode(response.buffer);
    const [topic] = decoded.responses;
    expect(topic.topicName).toBe('agentrun.commands.v1');
    expect(undecodableOf(topic.partitions[0].messages[0])).toMatchObject({ baseOffset: '7', lastOffset: '7', reason: expect.stringMatching(/^snappy: /) });
    expect(topic.partitions[1].messages.map((m) => [m.offset, m.value?.toString()])).toEqual([['3', 'good']]);
  });
});
