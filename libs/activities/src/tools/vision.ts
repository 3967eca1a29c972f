import { BadArguments, readBytes, requireString, workspaceFile, type Tool } from './common';

export const VISION_MAX_BYTES = 32 * 1024 * 1024;

export interface ImageHeader {
  format: 'png' | 'jpeg' | 'gif';
  width: number;
  height: number;
  /** PNG: `bit depth/colour type`; JPEG: the frame type (baseline, progressive, ...); GIF: `87a` or `89a`. */
  detail: string;
}

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const PNG_COLOUR = new Map([
  [0, 'greyscale'],
  [2, 'truecolour'],
  [3, 'indexed'],
  [4, 'greyscale+alpha'],
  [6, 'truecolour+alpha'],
]);

const u16be = (b: Uint8Array, i: number) => (b[i] << 8) | b[i + 1];
const u16le = (b: Uint8Array, i: number) => b[i] | (b[i + 1] << 8);
const u32be = (b: Uint8Array, i: number) => ((b[i] << 24) | (b[i + 1] << 16) | (b[i + 2] << 8) | b[i + 3]) >>> 0;
const ascii = (b: Uint8Array, from: number, to: number) => String.fromCharCode(...b.subarray(from, to));

function png(b: Uint8Array): ImageHeader {
  // Signature, then the first chunk must be IHDR: length 13, type, width, height, bit depth, colour type, ...
  if (b.length < 8 + 8 + 13 || u32be(b, 8) !== 13 || ascii(b, 12, 16) !== 'IHDR') throw new BadArguments('PNG without a valid IHDR chunk');
  const width = u32be(b, 16);
  const height = u32be(b, 20);
  if (width === 0 || height === 0) throw new BadArguments(`PNG with an invalid size ${width}x${height}`);
  return { format: 'png', width, height, detail: `${b[24]}-bit ${PNG_COLOUR.get(b[25]) ?? `colour type ${b[25]}`}` };
}

function gif(b: Uint8Array): ImageHeader {
  // "GIF87a" / "GIF89a", then the logical screen descriptor: width and height, little-endian.
  if (b.length < 10) throw new BadArguments('GIF without a logical screen descriptor');
  return { format: 'gif', width: u16le(b, 6), height: u16le(b, 8), detail: ascii(b, 3, 6) };
}

/** Start-of-frame markers: C0-CF except DHT (C4), JPG (C8) and DAC (CC). */
const SOF = new Map([
  [0xc0, 'baseline'],
  [0xc1, 'extended sequential'],
  [0xc2, 'progressive'],
  [0xc3, 'lossless'],
  [0xc5, 'differential sequential'],
  [0xc6, 'differential progressive'],
  [0xc7, 'differential lossless'],
  [0xc9, 'arithmetic sequential'],
  [0xca, 'arithmetic progressive'],
  [0xcb, 'arithmetic lossless'],
  [0xcd, 'arithmetic differential sequential'],
  [0xce, 'arithmetic differential progressive'],
  [0xcf, 'arithmetic differential lossless'],
]);

function jpeg(b: Uint8Array): ImageHeader {
  // Walk the marker segments after SOI until a start-of-frame: [FF marker][length (incl. itself)][payload].
  let i = 2;
  while (i < b.length) {
    if (b[i] !== 0xff) throw new BadArguments(`JPEG with a corrupt marker at byte ${i}`);
    while (i < b.length && b[i] === 0xff) i++; // fill bytes
    if (i >= b.length) break;
    const marker = b[i++];
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) continue; // TEM, RSTn, SOI: no length
    if (marker === 0xd9 || marker === 0xda) break; // EOI, or SOS: scan data, and no frame header before it
    if (i + 2 > b.length) break;
    const length = u16be(b, i);
    if (length < 2) throw new BadArguments(`JPEG with a corrupt segment length at byte ${i}`);
    const type = SOF.get(marker);
    if (type !== undefined) {
      // Payload: sample precision (1), height (2), width (2), number of components (1), ...
      if (i + 8 > b.length || length < 8) break;
      return { format: 'jpeg', width: u16be(b, i + 5), height: u16be(b, i + 3), detail: `${type}, ${b[i + 7]} component(s)` };
    }
    i += length;
  }
  throw new BadArguments('JPEG without a start-of-frame header');
}

/** Recognises PNG, JPEG and GIF by their signature and reads the dimensions from the header bytes; anything else is BadArguments. */
export function imageHeader(bytes: Uint8Array): ImageHeader {
  if (PNG_SIGNATURE.every((v, i) => bytes[i] === v)) return png(bytes);
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return jpeg(bytes);
  if (bytes.length >= 6 && /^GIF8[79]a$/.test(ascii(bytes, 0, 6))) return gif(bytes);
  throw new BadArguments('not a PNG, JPEG or GIF image');
}

/** How many bytes fall in each of 16 equal ranges of byte value (0-15, 16-31, ..., 240-255). */
export function byteHistogram(bytes: Uint8Array, onChunk?: (done: number) => void, chunk = 1 << 20): number[] {
  const bins = new Array<number>(16).fill(0);
  for (let start = 0; start < bytes.length; start += chunk) {
    const end = Math.min(bytes.length, start + chunk);
    for (let i = start; i < end; i++) bins[bytes[i] >> 4]++;
    onChunk?.(end);
  }
  return bins;
}

/**
 * Image inspection on the CPU, standing in for a GPU vision model: reads the PNG/JPEG/GIF header for
 * format and dimensions and computes a 16-bin byte-value histogram as a crude content signature, filed
 * as `vision/<path>.json`. Anything that is not one of those images is BadArguments.
 */
export const visionTool: Tool = {
  name: 'vision',
  async run(args, ctx) {
    const file = await workspaceFile(ctx.workspace, requireString(args, 'path'));
    const bytes = await readBytes(file, VISION_MAX_BYTES);
    let header: ImageHeader;
    try {
      header = imageHeader(bytes);
    } catch (err) {
      if (err instanceof BadArguments) throw new BadArguments(`'${file.rel}': ${err.message}`);
      throw err;
    }
    ctx.heartbeat({ done: 0, of: bytes.length });
    const histogram = byteHistogram(bytes, (done) => ctx.heartbeat({ done, of: bytes.length }));
    const out = `vision/${file.rel}.json`;
    await ctx.workspace.write(out, JSON.stringify({ file: file.rel, bytes: file.size, ...header, histogram }, null, 2));
    return `${file.rel}: ${header.format.toUpperCase()} ${header.width}x${header.height} (${header.detail}), ${file.size} bytes -> ${out}`;
  },
};
