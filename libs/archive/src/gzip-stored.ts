import { crc32 } from 'node:zlib';

/** Largest payload of one DEFLATE stored block (its LEN field is 16 bits). */
const STORED_BLOCK_MAX = 65_535;

/** ID1 ID2 CM=8 (deflate) FLG=0 MTIME=0 XFL=0 OS=255 (unknown): no name, no time, so equal input gives equal bytes. */
const GZIP_HEADER = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff]);

/**
 * A gzip container whose DEFLATE stream is made only of stored (uncompressed, BTYPE=00) blocks,
 * written by hand. Compression is not worth its time for workspaces: deflate at level 9 ran 25-38 s
 * for a 337 MB workspace on one core; stored blocks cost a memcpy and a CRC, and any gunzip reads
 * them. Feed it with `frame` in order; the last call passes `final` (an empty buffer is fine there).
 */
export class StoredGzipWriter {
  private crc = 0;
  private size = 0;
  private started = false;

  /** Headers for `data` as stored blocks (plus the gzip header the first time), copied into one buffer. */
  frame(data: Buffer, final = false): Buffer {
    const blocks = Math.max(1, Math.ceil(data.length / STORED_BLOCK_MAX));
    const head = this.started ? 0 : GZIP_HEADER.length;
    const out = Buffer.allocUnsafe(head + data.length + blocks * 5 + (final ? 8 : 0));
    let pos = 0;
    if (!this.started) {
      pos += GZIP_HEADER.copy(out, 0);
      this.started = true;
    }
    for (let i = 0; i < blocks; i++) {
      const start = i * STORED_BLOCK_MAX;
      const len = Math.min(STORED_BLOCK_MAX, data.length - start);
      out[pos] = final && i === blocks - 1 ? 1 : 0; // BFINAL bit, BTYPE=00; the rest of the byte is skipped padding
      out.writeUInt16LE(len, pos + 1);
      out.writeUInt16LE(~len & 0xffff, pos + 3);
      pos += 5;
      pos += data.copy(out, pos, start, start + len);
    }
    this.crc = crc32(data, this.crc);
    this.size = (this.size + data.length) % 2 ** 32;
    if (final) {
      out.writeUInt32LE(this.crc >>> 0, pos);
      out.writeUInt32LE(this.size, pos + 4);
    }
    return out;
  }
}
