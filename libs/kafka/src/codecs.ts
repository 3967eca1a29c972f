import { gunzip, gzip } from 'node:zlib';
import { promisify } from 'node:util';
import { compress as zstdCompress, decompress as zstdDecompress } from '@mongodb-js/zstd';
import { compressFrame as lz4CompressFrame, decompressFrame as lz4DecompressFrame } from 'lz4-napi';
import { compressSync as snappyCompress, uncompressSync as snappyUncompress } from 'snappy';

/**
 * Kafka's record-batch codecs, in the form kafkajs takes them. kafkajs reads only gzip on its own; a
 * batch in any other codec made its consumer crash for good. These read and write all four, whoever
 * produced them (the Java client, librdkafka, franz-go, kafkajs), and refuse to inflate a batch past a
 * bound, so a small compressed batch cannot take the process's memory.
 */
export const KAFKA_COMPRESSIONS = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;
export type KafkaCompression = (typeof KAFKA_COMPRESSIONS)[number];

/** The codec ids of a record batch's attributes (its low three bits). */
export const CODEC_IDS: Record<KafkaCompression, number> = { none: 0, gzip: 1, snappy: 2, lz4: 3, zstd: 4 };

/** How far one batch may inflate by default: far above any producer's batch, far below the heap. */
export const DEFAULT_MAX_DECOMPRESSED_BATCH_BYTES = 64 * 1024 * 1024;

export interface KafkaCodec {
  compress(encoder: { buffer: Buffer }): Promise<Buffer>;
  decompress(buffer: Buffer): Promise<Buffer>;
}

/** A batch that was read from the broker but cannot be turned back into records. */
export class UndecodableBatchError extends Error {
  override readonly name = 'UndecodableBatchError';
}

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** Xerial's snappy framing, which the Java client writes: a magic header, then length-prefixed snappy blocks. */
const XERIAL_MAGIC = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);
const XERIAL_HEADER_BYTES = 16;
/** The Java client's block size. */
const XERIAL_BLOCK_BYTES = 32 * 1024;

function tooLarge(codec: string, bytes: number | bigint | string, max: number): UndecodableBatchError {
  return new UndecodableBatchError(`${codec}: the batch inflates to ${bytes} bytes, over the ${max}-byte limit (KAFKA_MAX_DECOMPRESSED_BATCH_BYTES)`);
}

function failed(codec: string, err: unknown): UndecodableBatchError {
  if (err instanceof UndecodableBatchError) return err;
  return new UndecodableBatchError(`${codec}: ${err instanceof Error ? err.message : String(err)}`);
}

/** A snappy block's own statement of its length: a little-endian base-128 varint at its start. */
function snappyLength(block: Buffer): number {
  let length = 0;
  for (let i = 0, shift = 0; i < 5 && i < block.length; i++, shift += 7) {
    length += (block[i] & 0x7f) * 2 ** shift;
    if ((block[i] & 0x80) === 0) return length;
  }
  throw new Error('snappy: the block has no length');
}

function snappyBlock(block: Buffer, budget: number, max: number): Buffer {
  const length = snappyLength(block);
  if (length > budget) throw tooLarge('snappy', length, max);
  return snappyUncompress(block) as Buffer;
}

export function snappyDecompress(buffer: Buffer, max: number): Buffer {
  if (buffer.length < XERIAL_HEADER_BYTES || !buffer.subarray(0, XERIAL_MAGIC.length).equals(XERIAL_MAGIC)) return snappyBlock(buffer, max, max);
  const blocks: Buffer[] = [];
  let total = 0;
  for (let at = XERIAL_HEADER_BYTES; at < buffer.length; ) {
    if (at + 4 > buffer.length) throw new Error('snappy: a truncated xerial block length');
    const size = buffer.readUInt32BE(at);
    at += 4;
    if (at + size > buffer.length) throw new Error('snappy: a truncated xerial block');
    const block = snappyBlock(buffer.subarray(at, at + size), max - total, max);
    total += block.length;
    blocks.push(block);
    at += size;
  }
  return Buffer.concat(blocks, total);
}

export function snappyCompressXerial(buffer: Buffer): Buffer {
  // Magic, then version 1 and the oldest compatible version 1, as the Java client writes them.
  const header = Buffer.alloc(XERIAL_HEADER_BYTES);
  XERIAL_MAGIC.copy(header);
  header.writeInt32BE(1, 8);
  header.writeInt32BE(1, 12);
  const parts: Buffer[] = [header];
  for (let at = 0; at < buffer.length; at += XERIAL_BLOCK_BYTES) {
    const block = snappyCompress(buffer.subarray(at, at + XERIAL_BLOCK_BYTES));
    const size = Buffer.alloc(4);
    size.writeUInt32BE(block.length);
    parts.push(size, block);
  }
  return Buffer.concat(parts);
}

/** The content size an LZ4 frame declares, if it does (FLG bit 3). */
export function lz4DeclaredSize(buffer: Buffer): bigint | undefined {
  if (buffer.length < 15 || buffer.readUInt32LE(0) !== 0x184d2204) return undefined;
  return (buffer[4] & 0x08) !== 0 ? buffer.readBigUInt64LE(6) : undefined;
}

/** The content size a zstd frame declares, if it does (RFC 8878 3.1.1.1). */
export function zstdDeclaredSize(buffer: Buffer): bigint | undefined {
  if (buffer.length < 6 || buffer.readUInt32LE(0) !== 0xfd2fb528) return undefined;
  const descriptor = buffer[4];
  const sizeFlag = descriptor >> 6;
  const singleSegment = (descriptor & 0x20) !== 0;
  const dictBytes = [0, 1, 2, 4][descriptor & 0x03];
  const sizeBytes = sizeFlag === 0 ? (singleSegment ? 1 : 0) : [0, 2, 4, 8][sizeFlag];
  if (sizeBytes === 0) return undefined;
  const at = 5 + (singleSegment ? 0 : 1) + dictBytes;
  if (buffer.length < at + sizeBytes) return undefined;
  switch (sizeBytes) {
    case 1:
      return BigInt(buffer[at]);
    case 2:
      return BigInt(buffer.readUInt16LE(at) + 256);
    case 4:
      return BigInt(buffer.readUInt32LE(at));
    default:
      return buffer.readBigUInt64LE(at);
  }
}

/** A read position in concatenated frames, which fails on reading past their end. */
class FrameCursor {
  at = 0;
  total = 0;
  constructor(
    readonly buffer: Buffer,
    private readonly codec: string,
  ) {}

  need(bytes: number): void {
    if (this.at + bytes > this.buffer.length) throw new Error(`${this.codec}: a truncated frame`);
  }
}

/**
 * Walks concatenated frames of one format, passing over skippable frames (magic 0x184D2A5?, a size,
 * bytes: zstd and LZ4 share them); `frame` reads one frame on from its magic number, adding the most its
 * blocks inflate to. Returns the sum.
 */
function framesBound(buffer: Buffer, codec: string, magic: number, frame: (c: FrameCursor) => void): number {
  const cursor = new FrameCursor(buffer, codec);
  while (cursor.at < buffer.length) {
    cursor.need(8);
    const found = buffer.readUInt32LE(cursor.at);
    if ((found & 0xfffffff0) >>> 0 === 0x184d2a50) {
      cursor.at += 8 + buffer.readUInt32LE(cursor.at + 4);
      continue;
    }
    if (found !== magic) throw new Error(`${codec}: not a ${codec} frame`);
    frame(cursor);
  }
  return cursor.total;
}

/** A zstd block inflates to at most 128 KiB (Block_Maximum_Size, RFC 8878 3.1.1.2.4). */
const ZSTD_BLOCK_MAX = 128 * 1024;

/**
 * The most that zstd frames can inflate to, read from their block headers without inflating them: a
 * raw or RLE block says its size, a compressed one inflates to at most 128 KiB. Streaming encoders (the
 * Java client's, ours) mostly fill whole blocks, so this stays near the true size (block splitting at
 * some levels cuts blocks short: a third over, measured on 3 MiB). Throws on a frame it cannot walk.
 */
export function zstdInflatedBound(buffer: Buffer): number {
  return framesBound(buffer, 'zstd', 0xfd2fb528, (c) => {
    const descriptor = buffer[c.at + 4];
    const singleSegment = (descriptor & 0x20) !== 0;
    const sizeFlag = descriptor >> 6;
    c.at += 5 + (singleSegment ? 0 : 1) + [0, 1, 2, 4][descriptor & 0x03] + (sizeFlag === 0 ? (singleSegment ? 1 : 0) : [0, 2, 4, 8][sizeFlag]);
    for (let last = false; !last; ) {
      c.need(3);
      const header = buffer.readUIntLE(c.at, 3);
      c.at += 3;
      last = (header & 1) === 1;
      const type = (header >> 1) & 3;
      const size = header >>> 3;
      if (type === 3) throw new Error('zstd: a reserved block type');
      // Raw and RLE (one byte, repeated) blocks say their size; a compressed one holds at most a block.
      c.total += type === 2 ? ZSTD_BLOCK_MAX : size;
      c.at += type === 1 ? 1 : size;
    }
    if ((descriptor & 0x04) !== 0) c.at += 4; // content checksum
  });
}

/** LZ4 frame block sizes by the BD byte's bits 4-6. */
const LZ4_BLOCK_MAX: Record<number, number> = { 4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024 };

/**
 * The most that LZ4 frames can inflate to, read from their block headers without inflating them: an
 * uncompressed block says its size, a compressed one inflates to at most its frame's block size and at
 * most 255 bytes for each of its own (LZ4's highest ratio). Throws on a frame it cannot walk.
 */
export function lz4InflatedBound(buffer: Buffer): number {
  return framesBound(buffer, 'lz4', 0x184d2204, (c) => {
    const flags = buffer[c.at + 4];
    const blockMax = LZ4_BLOCK_MAX[(buffer[c.at + 5] >> 4) & 0x07];
    if (!blockMax) throw new Error('lz4: an unknown block size');
    c.at += 6 + ((flags & 0x08) !== 0 ? 8 : 0) + ((flags & 0x01) !== 0 ? 4 : 0) + 1;
    for (;;) {
      c.need(4);
      const word = buffer.readUInt32LE(c.at);
      c.at += 4;
      if (word === 0) break; // EndMark
      const size = word & 0x7fffffff;
      c.total += (word & 0x80000000) !== 0 ? size : Math.min(blockMax, size * 255 + 16);
      c.at += size + ((flags & 0x10) !== 0 ? 4 : 0);
    }
    if ((flags & 0x04) !== 0) c.at += 4; // content checksum
  });
}

/** Refuses a frame that says, or whose blocks allow, more than `max` bytes: before anything is inflated. */
function checked(codec: string, declared: bigint | undefined, bound: () => number, max: number): void {
  if (declared !== undefined) {
    if (declared > BigInt(max)) throw tooLarge(codec, declared, max);
    return;
  }
  const most = bound();
  if (most > max) throw new UndecodableBatchError(`${codec}: the batch may inflate to ${most} bytes (by its blocks), over the ${max}-byte limit (KAFKA_MAX_DECOMPRESSED_BATCH_BYTES)`);
}

function bounded(codec: string, out: Buffer, max: number): Buffer {
  if (out.length > max) throw tooLarge(codec, out.length, max);
  return out;
}

/**
 * The codec for one compression type. Decompression is bounded by `maxBytes`: gzip stops inflating
 * there; snappy, LZ4 and zstd refuse, before inflating, a batch whose declared size (or, when it
 * declares none, the most its blocks can hold) is over it. Every failure is an UndecodableBatchError.
 */
export function kafkaCodec(kind: Exclude<KafkaCompression, 'none'>, maxBytes: number): KafkaCodec {
  switch (kind) {
    case 'gzip':
      return {
        compress: ({ buffer }) => gzipAsync(buffer),
        decompress: failingAs('gzip', async (buffer) => {
          try {
            return await gunzipAsync(buffer, { maxOutputLength: maxBytes });
          } catch (err) {
            if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge('gzip', `more than ${maxBytes}`, maxBytes);
            throw err;
          }
        }),
      };
    case 'snappy':
      return {
        compress: async ({ buffer }) => snappyCompressXerial(buffer),
        decompress: failingAs('snappy', async (buffer) => snappyDecompress(buffer, maxBytes)),
      };
    case 'lz4':
      return {
        // Independent blocks of up to 4 MiB, no checksums: a frame every Kafka client reads (the Java
        // client takes block sizes 64 KiB to 4 MiB, independent blocks only).
        compress: ({ buffer }) => lz4CompressFrame(buffer),
        decompress: framedDecompress('lz4', lz4DeclaredSize, lz4InflatedBound, lz4DecompressFrame, maxBytes),
      };
    case 'zstd':
      return {
        compress: ({ buffer }) => zstdCompress(buffer, 3),
        decompress: framedDecompress('zstd', zstdDeclaredSize, zstdInflatedBound, zstdDecompress, maxBytes),
      };
  }
}

/** A decompression whose every failure is an UndecodableBatchError naming the codec. */
function failingAs(codec: string, inflate: (buffer: Buffer) => Promise<Buffer>): (buffer: Buffer) => Promise<Buffer> {
  return async (buffer) => {
    try {
      return await inflate(buffer);
    } catch (err) {
      throw failed(codec, err);
    }
  };
}

/** LZ4 and zstd: refused before inflating from the size their frames state or their blocks allow, and checked after. */
function framedDecompress(
  codec: string,
  declared: (buffer: Buffer) => bigint | undefined,
  bound: (buffer: Buffer) => number,
  inflate: (buffer: Buffer) => Promise<Buffer>,
  maxBytes: number,
): (buffer: Buffer) => Promise<Buffer> {
  return failingAs(codec, async (buffer) => {
    checked(codec, declared(buffer), () => bound(buffer), maxBytes);
    return bounded(codec, await inflate(buffer), maxBytes);
  });
}
