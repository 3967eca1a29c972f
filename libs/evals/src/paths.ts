/**
 * Workspace paths named by eval cases (`files`) and file checks: relative POSIX paths that stay inside
 * the run's workspace by their spelling alone, so no check needs the file system to know they are safe.
 */

export const MAX_PATH_CHARS = 512;

/** Why `path` is not a workspace path, or undefined when it is one. */
export function workspacePathProblem(path: string): string | undefined {
  if (path.length === 0) return 'is empty';
  if (path.length > MAX_PATH_CHARS) return `is longer than ${MAX_PATH_CHARS} characters`;
  if (path.includes('\\')) return 'contains a backslash (use / between folders)';
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  if (/[\u0000-\u001f\u007f]/.test(path)) return 'contains a control character';
  if (path.startsWith('/')) return 'is absolute (it must be relative to the workspace)';
  if (/^[A-Za-z]:/.test(path)) return 'starts with a drive letter (it must be relative to the workspace)';
  const segments = path.split('/');
  if (segments.includes('..')) return "contains '..'";
  if (segments.includes('.')) return "contains a '.' segment";
  if (segments.includes('')) return "contains an empty segment ('//' or a trailing '/')";
  return undefined;
}
