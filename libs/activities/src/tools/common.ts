import { open, readFile, realpath, stat } from 'node:fs/promises';
import { relative, resolve, sep } from 'node:path';
import type { ToolName } from '@agentrun/contracts';
import type { Workspace } from '../workspace';

export class BadArguments extends Error {
  override readonly name = 'BadArguments';
}

export interface ToolContext {
  workspace: Workspace;
  step: number;
  /** Called between units of work so a stalled attempt is noticed and a retry can resume. */
  heartbeat(progress: { done: number; of: number }): void;
}

export interface Tool {
  readonly name: ToolName;
  run(args: Record<string, string | number>, ctx: ToolContext): Promise<string>;
}

export type ToolArgs = Record<string, string | number>;

const WORD = /[\p{L}\p{N}]{2,}/gu;

/** Every lower-cased term of two or more letters or digits, in order. */
export function tokenize(text: string): string[] {
  return text.toLowerCase().match(WORD) ?? [];
}

/** The first 64 terms: what `search` and `embed` look at. */
export function terms(text: string): string[] {
  return tokenize(text).slice(0, 64);
}

export function requireString(args: ToolArgs, name: string): string {
  const value = args[name];
  if (typeof value !== 'string' || value.trim() === '') throw new BadArguments(`argument '${name}' must be a non-empty string`);
  return value;
}

/** A file the tool may read: its workspace-relative path (with `/`), its real location and its size. */
export interface WorkspaceFile {
  rel: string;
  full: string;
  size: number;
}

const isMissing = (err: unknown) => ['ENOENT', 'ENOTDIR'].includes((err as NodeJS.ErrnoException).code ?? '');

/**
 * Resolves a tool's `path` argument to a regular file inside the workspace, or throws BadArguments:
 * absolute paths, `..` that leave the run's directory and symlinks that point outside it are refused,
 * and so are missing files and directories.
 */
export async function workspaceFile(workspace: Workspace, file: string): Promise<WorkspaceFile> {
  if (file.includes('\0')) throw new BadArguments('path must not contain NUL characters');
  const lexical = resolve(workspace.dir, file);
  if (lexical === workspace.dir) throw new BadArguments(`'${file}' is not a regular file`);
  if (!lexical.startsWith(workspace.dir + sep)) throw new BadArguments(`path '${file}' escapes the workspace`);
  let full: string;
  let base: string;
  try {
    base = await realpath(workspace.dir);
    full = await realpath(lexical);
  } catch (err) {
    if (isMissing(err)) throw new BadArguments(`no file '${file}' in the workspace`);
    throw err;
  }
  if (!full.startsWith(base + sep)) throw new BadArguments(`path '${file}' escapes the workspace`);
  const info = await stat(full);
  if (!info.isFile()) throw new BadArguments(`'${file}' is not a regular file`);
  return { rel: relative(workspace.dir, lexical).split(sep).join('/'), full, size: info.size };
}

/** The whole file, refused with BadArguments when it is larger than `limit` bytes. */
export async function readBytes(file: WorkspaceFile, limit: number): Promise<Buffer> {
  if (file.size > limit) throw new BadArguments(`'${file.rel}' is ${file.size} bytes, over the ${limit}-byte limit`);
  return readFile(file.full);
}

/** At most the first `limit` bytes of the file, without reading the rest. */
export async function readPrefix(file: WorkspaceFile, limit: number): Promise<Buffer> {
  const handle = await open(file.full, 'r');
  try {
    const buffer = Buffer.alloc(Math.min(limit, file.size));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** Text files have no NUL byte in their first 8 KiB (the heuristic git and grep use). */
export function looksBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, 8192).includes(0);
}

/** A short single-line rendering of some text for a tool's one-line summary. */
export function oneLine(text: string, max = 120): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
