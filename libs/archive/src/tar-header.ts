/**
 * The tar header block, both ways: POSIX ustar (pax interchange format) for what we write, plus the
 * GNU and pax extensions we accept on read. Everything here is pure byte work on 512-byte blocks.
 */

export const BLOCK = 512;

/** Largest size an 11-digit octal field holds (8 GiB - 1); anything larger needs pax `size`. */
const MAX_OCTAL_SIZE = 0o77777777777;

export type EntryType = 'file' | 'dir' | 'symlink';

export interface HeaderFields {
  /** Archive path, `/`-separated, no leading `./`; directories without the trailing `/` (added here). */
  path: string;
  type: EntryType;
  mode: number;
  size: number;
  /** Whole seconds since the epoch. */
  mtime: number;
  linkname?: string;
}

const TYPEFLAG: Record<EntryType, string> = { file: '0', dir: '5', symlink: '2' };

/**
 * The header block(s) of one entry: a pax extended header ('x') first when the path or link name does
 * not fit ustar's fields or the size is 8 GiB or more. Owner is always 0/0 with empty names, so an
 * archive restores the same for whoever unpacks it.
 */
export function encodeHeader(entry: HeaderFields): Buffer {
  const path = entry.type === 'dir' ? `${entry.path}/` : entry.path;
  const split = splitUstarPath(path);
  const linkname = entry.linkname ?? '';
  const linkFits = Buffer.byteLength(linkname) <= 100;
  const sizeFits = entry.size <= MAX_OCTAL_SIZE;

  const pax: [string, string][] = [];
  if (!split) pax.push(['path', path]);
  if (!linkFits) pax.push(['linkpath', linkname]);
  if (!sizeFits) pax.push(['size', String(entry.size)]);

  const main = ustarBlock({
    name: split?.name ?? truncateUtf8(path, 100),
    prefix: split?.prefix ?? '',
    mode: entry.mode,
    size: entry.size,
    mtime: entry.mtime,
    typeflag: TYPEFLAG[entry.type],
    linkname: linkFits ? linkname : truncateUtf8(linkname, 100),
  });
  if (pax.length === 0) return main;

  const records = Buffer.from(pax.map(([k, v]) => paxRecord(k, v)).join(''));
  const paxHeader = ustarBlock({
    // What a reader without pax support extracts the records as; GNU tar uses the same shape.
    name: truncateUtf8(`PaxHeaders/${lastComponent(path)}`, 100),
    prefix: '',
    mode: 0o644,
    size: records.length,
    mtime: entry.mtime,
    typeflag: 'x',
    linkname: '',
  });
  return Buffer.concat([paxHeader, records, Buffer.alloc(padding(records.length)), main]);
}

/** Zero bytes needed after `size` bytes of data to reach the next block boundary. */
export function padding(size: number): number {
  return (BLOCK - (size % BLOCK)) % BLOCK;
}

/** `"<len> <key>=<value>\n"`, where len counts the whole record including its own digits. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const bodyBytes = Buffer.byteLength(body);
  let len = bodyBytes + String(bodyBytes).length;
  if (String(len).length + bodyBytes !== len) len = bodyBytes + String(len).length;
  return `${len}${body}`;
}

/** ustar splits a long path at a `/` into prefix (<= 155 bytes) and name (<= 100 bytes); undefined when it cannot. */
function splitUstarPath(path: string): { prefix: string; name: string } | undefined {
  const bytes = Buffer.from(path);
  if (bytes.length <= 100) return { prefix: '', name: path };
  if (bytes.length > 256) return undefined;
  // A directory's trailing slash must stay with the name, so never split there.
  for (let i = bytes.length - 2; i > 0; i--) {
    if (bytes[i] !== 0x2f) continue;
    if (i > 155) continue;
    if (bytes.length - i - 1 > 100) return undefined;
    return { prefix: bytes.subarray(0, i).toString(), name: bytes.subarray(i + 1).toString() };
  }
  return undefined;
}

function lastComponent(path: string): string {
  const parts = path.split('/').filter(Boolean);
  return parts[parts.length - 1] ?? '';
}

/** At most `max` bytes of `s`, never cutting a UTF-8 sequence in half. */
function truncateUtf8(s: string, max: number): string {
  const bytes = Buffer.from(s);
  if (bytes.length <= max) return s;
  let end = max;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString();
}

interface UstarFields {
  name: string;
  prefix: string;
  mode: number;
  size: number;
  mtime: number;
  typeflag: string;
  linkname: string;
}

function ustarBlock(f: UstarFields): Buffer {
  const block = Buffer.alloc(BLOCK);
  block.write(f.name, 0, 100, 'utf8');
  writeOctal(block, 100, 8, f.mode & 0o777);
  writeOctal(block, 108, 8, 0);
  writeOctal(block, 116, 8, 0);
  writeSize(block, f.size);
  writeOctal(block, 136, 12, Math.max(0, Math.min(Math.floor(f.mtime), MAX_OCTAL_SIZE)));
  block.write(f.typeflag, 156, 1, 'latin1');
  block.write(f.linkname, 157, 100, 'utf8');
  block.write('ustar\u000000', 257, 8, 'latin1');
  // uname/gname (265, 297) stay empty; devmajor/devminor as octal zeros like GNU tar writes them.
  writeOctal(block, 329, 8, 0);
  writeOctal(block, 337, 8, 0);
  block.write(f.prefix, 345, 155, 'utf8');
  writeOctal(block, 148, 8, checksumOf(block), 6);
  block[154] = 0;
  block[155] = 0x20;
  return block;
}

/** Zero-padded octal, NUL-terminated, in a field of `width` bytes (`digits` digits; width - 1 by default). */
function writeOctal(block: Buffer, offset: number, width: number, value: number, digits = width - 1): void {
  block.write(value.toString(8).padStart(digits, '0'), offset, digits, 'latin1');
  if (digits < width) block[offset + digits] = 0;
}

/** Octal when it fits; otherwise GNU base-256 (the pax `size` record is what pax readers use). */
function writeSize(block: Buffer, size: number): void {
  if (size <= MAX_OCTAL_SIZE) return writeOctal(block, 124, 12, size);
  let v = BigInt(size);
  for (let i = 135; i > 124; i--) {
    block[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  block[124] = 0x80;
}

/** Sum of all header bytes with the checksum field itself counted as spaces. */
export function checksumOf(block: Buffer): number {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i];
  return sum;
}

/** The same with the bytes read as signed, which some old tar implementations wrote. */
function signedChecksumOf(block: Buffer): number {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (block[i] << 24) >> 24;
  return sum;
}

// ---------------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------------

export interface RawHeader {
  /** ustar prefix + name (POSIX ustar only; GNU headers use the prefix area for other things). */
  name: string;
  mode: number;
  size: number;
  mtime: number;
  typeflag: string;
  linkname: string;
}

export class HeaderError extends Error {}

export function isZeroBlock(block: Buffer): boolean {
  for (let i = 0; i < BLOCK; i++) if (block[i] !== 0) return false;
  return true;
}

/** Parses one header block; throws HeaderError when its checksum or a number is wrong. */
export function decodeHeader(block: Buffer): RawHeader {
  const stored = readNumber(block, 148, 8, 'checksum');
  if (stored !== checksumOf(block) && stored !== signedChecksumOf(block)) throw new HeaderError('header checksum mismatch');
  const magic = block.toString('latin1', 257, 263);
  let name = readString(block, 0, 100);
  if (magic === 'ustar\u0000') {
    const prefix = readString(block, 345, 155);
    if (prefix) name = `${prefix}/${name}`;
  }
  return {
    name,
    mode: readNumber(block, 100, 8, 'mode'),
    size: readNumber(block, 124, 12, 'size'),
    mtime: readNumber(block, 136, 12, 'mtime'),
    typeflag: String.fromCharCode(block[156]),
    linkname: readString(block, 157, 100),
  };
}

/** A NUL-terminated (or field-filling) UTF-8 string. */
export function readString(buf: Buffer, offset: number, width: number): string {
  const end = buf.indexOf(0, offset);
  return buf.toString('utf8', offset, end === -1 || end > offset + width ? offset + width : end);
}

/** Octal (spaces/NULs around it allowed) or GNU base-256 (high bit of the first byte set). */
function readNumber(buf: Buffer, offset: number, width: number, what: string): number {
  if (buf[offset] & 0x80) {
    if (buf[offset] === 0xff) throw new HeaderError(`negative ${what}`);
    let v = BigInt(buf[offset] & 0x7f);
    for (let i = offset + 1; i < offset + width; i++) v = (v << 8n) | BigInt(buf[i]);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new HeaderError(`${what} out of range`);
    return Number(v);
  }
  const text = buf.toString('latin1', offset, offset + width).replace(/\0.*$/s, '').trim();
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) throw new HeaderError(`bad ${what} field '${text}'`);
  return parseInt(text, 8);
}

/** pax extended header records -> key/value pairs; throws HeaderError on a malformed record. */
export function parsePaxRecords(data: Buffer): Map<string, string> {
  const out = new Map<string, string>();
  let pos = 0;
  while (pos < data.length) {
    if (data[pos] === 0) break; // some writers pad the record area with NULs
    const space = data.indexOf(0x20, pos);
    if (space === -1) throw new HeaderError('malformed pax record');
    const len = Number(data.toString('latin1', pos, space));
    if (!Number.isInteger(len) || len <= space - pos || pos + len > data.length || data[pos + len - 1] !== 0x0a) {
      throw new HeaderError('malformed pax record');
    }
    const record = data.toString('utf8', space + 1, pos + len - 1);
    const eq = record.indexOf('=');
    if (eq <= 0) throw new HeaderError('malformed pax record');
    out.set(record.slice(0, eq), record.slice(eq + 1));
    pos += len;
  }
  return out;
}
