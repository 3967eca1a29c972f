import { gzipSync } from 'node:zlib';
import { compress as zstdCompress } from '@mongodb-js/zstd';
import { compressFrameSync } from 'lz4-napi';
import { compressSync as snappyRaw } from 'snappy';
import { UndecodableBatchError, kafkaCodec, lz4DeclaredSize, lz4InflatedBound, zstdInflatedBound, snappyCompressXerial, snappyDecompress, zstdDeclaredSize, KAFKA_COMPRESSIONS } from './codecs';

const MIB = 1024 * 1024;
/** Text that compresses, then bytes that do not. */
const sample = Buffer.concat([Buffer.from('a record batch '.repeat(5_000)), Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919) % 251))]);

describe('Kafka codecs', () => {
  it.each(KAFKA_COMPRESSIONS.filter((k) => k !== 'none'))('%s: what it compresses it reads back, and it is smaller', async (kind) => {
    const codec = kafkaCodec(kind, MIB);
    const packed = await codec.compress({ buffer: sample });
    expect(packed.length).toBeLessThan(sample.length);
    expect((await codec.decompress(packed)).equals(sample)).toBe(true);
  });

  it('snappy reads both raw blocks (librdkafka, kafkajs-snappy) and the xerial framing (the Java client)', async () => {
    const codec = kafkaCodec('snappy', MIB);
    expect((await codec.decompress(snappyRaw(sample))).equals(sample)).toBe(true);
    const framed = snappyCompressXerial(sample);
    // The Java client's header: magic, version 1, compatible 1; then one block per 32 KiB.
    expect(framed.subarray(0, 16).toString('hex')).toBe('82534e41505059000000000100000001');
    expect((await codec.decompress(framed)).equals(sample)).toBe(true);
  });

  it('refuses a batch that inflates past the bound, for every codec, before or while inflating', async () => {
    const bomb = Buffer.alloc(3 * MIB, 'a');
    const packed = {
      gzip: gzipSync(bomb),
      snappy: snappyCompressXerial(bomb),
      lz4: compressFrameSync(bomb),
      zstd: await zstdCompress(bomb, 3),
    };
    for (const [kind, bytes] of Object.entries(packed) as [keyof typeof packed, Buffer][]) {
      expect(bytes.length).toBeLessThan(MIB / 4);
      await expect(kafkaCodec(kind, MIB).decompress(bytes)).rejects.toThrow(new RegExp(`^${kind}: the batch (inflates|may inflate) to .* over the 1048576-byte limit`));
      await expect(kafkaCodec(kind, 4 * MIB).decompress(bytes)).resolves.toHaveLength(bomb.length);
    }
    // A raw snappy block says its length first: refused without inflating.
    expect(() => snappyDecompress(snappyRaw(bomb), MIB)).toThrow(/inflates to 3145728 bytes/);
  });

  it('reads the sizes zstd and LZ4 frames declare', async () => {
    // librdkafka's frames say their size (a single segment, 4 bytes of it here); streaming compressors' do not.
    const header = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0, 0, 0, 0]);
    header.writeUInt32LE(300_000, 5);
    expect(zstdDeclaredSize(header)).toBe(300_000n);
    expect(zstdDeclaredSize(Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x20, 100]))).toBe(100n);
    expect(zstdDeclaredSize(await zstdCompress(Buffer.alloc(300_000, 1), 3))).toBeUndefined();
    expect(zstdDeclaredSize(Buffer.from('not zstd at all'))).toBeUndefined();
    // lz4_flex writes no content size; a frame with FLG bit 3 carries it after the descriptor.
    expect(lz4DeclaredSize(compressFrameSync(Buffer.alloc(1000, 1)))).toBeUndefined();
    const withSize = Buffer.from([0x04, 0x22, 0x4d, 0x18, 0x68, 0x40, 0x00, 0x00, 0x40, 0, 0, 0, 0, 0, 0]);
    expect(lz4DeclaredSize(withSize)).toBe(0x400000n);
  });

  it('bounds what zstd and LZ4 frames without a declared size inflate to, from their blocks, without inflating them', async () => {
    for (const size of [100, 5_000, 200_000, 3 * MIB]) {
      const same = Buffer.alloc(size, 'a');
      const random = Buffer.from(Array.from({ length: size }, (_, i) => (i * 2_654_435_761) >>> 24));
      for (const data of [same, random]) {
        const zstd = zstdInflatedBound(await zstdCompress(data, 3));
        const lz4 = lz4InflatedBound(compressFrameSync(data));
        // Never below the truth, and near it: zstd's block splitting may cut a block short, LZ4 fills its blocks.
        expect(zstd).toBeGreaterThanOrEqual(size);
        expect(zstd).toBeLessThanOrEqual(2 * size + 128 * 1024);
        // LZ4: a block not yet full may hold up to the frame's block size (4 MiB in lz4-napi's frames).
        expect(lz4).toBeGreaterThanOrEqual(size);
        expect(lz4).toBeLessThanOrEqual(size + 4 * MIB);
      }
    }
    // The Java client's zstd (streaming, no size) over the bound is refused before inflating: the bound says so.
    await expect(kafkaCodec('zstd', MIB).decompress(await zstdCompress(Buffer.alloc(3 * MIB, 'a'), 3))).rejects.toThrow(/^zstd: the batch may inflate to \d+ bytes \(by its blocks\)/);
    expect(() => zstdInflatedBound(Buffer.from('28b52ffd00', 'hex'))).toThrow(/truncated/);
    expect(() => lz4InflatedBound(Buffer.from('not an lz4 frame'))).toThrow(/not a lz4 frame/);
  });

  it('says which codec failed, as an UndecodableBatchError', async () => {
    for (const kind of ['gzip', 'snappy', 'lz4', 'zstd'] as const) {
      const err = await kafkaCodec(kind, MIB)
        .decompress(Buffer.from('these bytes are in no codec at all'))
        .then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(UndecodableBatchError);
      expect((err as Error).message).toMatch(new RegExp(`^${kind}: `));
    }
  });
});
