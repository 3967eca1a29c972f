import { constants } from 'node:fs';
import { lstat, mkdir, open, readdir, readFile, realpath, stat } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { BadArguments } from './tools/common';

/** A run's workspace: `{WORKSPACE_ROOT}/{org}/{run_id}`. Org and run id patterns never contain `/` or `..`. */
export class Workspace {
  readonly dir: string;

  constructor(root: string, org: string, runId: string) {
    this.dir = resolve(root, org, runId);
    const base = resolve(root);
    if (!this.dir.startsWith(base + sep)) throw new Error(`workspace for ${org}/${runId} escapes ${base}`);
  }

  private path(file: string): string {
    const full = resolve(this.dir, file);
    if (!full.startsWith(this.dir + sep)) throw new Error(`path '${file}' escapes the workspace`);
    return full;
  }

  /**
   * Writes a file, making its directories. A command the run ran may have left links in the workspace,
   * so the path is checked on disk, not only by its text: a directory on the way, or the file itself,
   * that is a link resolving outside the workspace is refused (BadArguments: a tool's error result), and
   * the file is opened without following a link, so one made after the check is refused too.
   */
  async write(file: string, content: string | Uint8Array): Promise<void> {
    const target = await this.writablePath(file);
    await mkdir(dirname(target), { recursive: true });
    let handle;
    try {
      handle = await open(target, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o644);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw new BadArguments(`'${file}' became a link while it was written`);
      throw err;
    }
    try {
      await handle.writeFile(content);
    } finally {
      await handle.close();
    }
  }

  /** Where `file` is written: its existing parts resolved on disk, every one inside the workspace. */
  private async writablePath(file: string): Promise<string> {
    const lexical = this.path(file);
    await mkdir(this.dir, { recursive: true });
    const base = await realpath(this.dir);
    const inside = (p: string) => p === base || p.startsWith(base + sep);
    let at = base;
    const parts = relative(this.dir, lexical).split(sep);
    for (const [i, part] of parts.entries()) {
      const next = join(at, part);
      let info;
      try {
        info = await lstat(next);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return join(next, ...parts.slice(i + 1));
        throw err;
      }
      if (info.isSymbolicLink()) {
        let real: string;
        try {
          real = await realpath(next);
        } catch {
          throw new BadArguments(`'${file}' goes through a link that leads nowhere (${parts.slice(0, i + 1).join('/')})`);
        }
        if (!inside(real)) throw new BadArguments(`'${file}' goes through a link out of the workspace (${parts.slice(0, i + 1).join('/')})`);
        at = real;
      } else {
        if (i < parts.length - 1 && !info.isDirectory()) throw new BadArguments(`'${parts.slice(0, i + 1).join('/')}' is not a directory`);
        at = next;
      }
    }
    return at;
  }

  async read(file: string): Promise<string> {
    return readFile(this.path(file), 'utf8');
  }

  /** Every regular file, relative to the workspace, in a stable order. */
  async list(): Promise<string[]> {
    const out: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw err;
      }
      for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
        const full = join(dir, entry.name);
        if (entry.isDirectory()) await walk(full);
        else if (entry.isFile()) out.push(relative(this.dir, full));
      }
    };
    await walk(this.dir);
    return out;
  }

  async size(file: string): Promise<number> {
    return (await stat(this.path(file))).size;
  }
}
