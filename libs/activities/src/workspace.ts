import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';

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

  async write(file: string, content: string | Uint8Array): Promise<void> {
    const full = this.path(file);
    await mkdir(join(full, '..'), { recursive: true });
    await writeFile(full, content);
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
