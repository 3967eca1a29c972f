import { BadArguments, looksBinary, readPrefix, workspaceFile, type Tool, type ToolArgs } from './common';

export const FETCH_MAX_BYTES = 4096;
export const NETWORK_DISABLED = 'network fetches are disabled in this deployment';

const WORKSPACE_URL = /^workspace:\/\/(.+)$/is;
const SCHEME = /^([a-z][a-z0-9+.-]*):/i;

/** The workspace path a `{ path }` or `{ url }` argument names; anything that would leave the machine is refused. */
function target(args: ToolArgs): string {
  const { path, url } = args;
  if (path !== undefined && url !== undefined) throw new BadArguments("give either 'path' or 'url', not both");
  if (path !== undefined) {
    if (typeof path !== 'string' || path.trim() === '') throw new BadArguments("argument 'path' must be a non-empty string");
    return path;
  }
  if (typeof url !== 'string' || url.trim() === '') throw new BadArguments("fetch needs a 'path' or a 'url' (workspace://<path>)");
  const inside = WORKSPACE_URL.exec(url.trim())?.[1];
  if (inside !== undefined) {
    try {
      return decodeURIComponent(inside);
    } catch {
      throw new BadArguments(`malformed percent-encoding in '${url}'`);
    }
  }
  const scheme = SCHEME.exec(url.trim())?.[1]?.toLowerCase();
  if (scheme === 'http' || scheme === 'https') throw new BadArguments(NETWORK_DISABLED);
  throw new BadArguments(`unsupported URL '${url}': only workspace://<path> URLs are accepted (${NETWORK_DISABLED})`);
}

/** Cuts a truncated UTF-8 prefix back to its last whole character, so a multi-byte character is never split. */
function wholeCharacters(bytes: Buffer): Buffer {
  let start = bytes.length - 1;
  while (start > 0 && bytes.length - start < 4 && (bytes[start] & 0xc0) === 0x80) start--;
  if (start < 0) return bytes;
  const lead = bytes[start];
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return bytes.length - start < need ? bytes.subarray(0, start) : bytes;
}

/**
 * A workspace file reader, not a web client: this deployment has no outside network and no tool may
 * reach outside the run's workspace. `{ path }` or `{ url: 'workspace://<path>' }` returns the file's
 * size and its first 4 KiB; an `http(s)://` URL (or any other scheme) is refused with BadArguments.
 * Nothing is written.
 */
export const fetchTool: Tool = {
  name: 'fetch',
  async run(args, ctx) {
    const file = await workspaceFile(ctx.workspace, target(args));
    ctx.heartbeat({ done: 0, of: 1 });
    const head = await readPrefix(file, FETCH_MAX_BYTES);
    ctx.heartbeat({ done: 1, of: 1 });
    if (looksBinary(head)) return `${file.rel} (${file.size} bytes, binary; not shown)`;
    if (file.size <= head.length) return `${file.rel} (${file.size} bytes, all shown)\n${head.toString('utf8')}`;
    const shown = wholeCharacters(head);
    return `${file.rel} (${file.size} bytes, first ${shown.length} shown)\n${shown.toString('utf8')}`;
  },
};
