import { MAX_PATH_CHARS, workspacePathProblem } from './paths';

describe('workspacePathProblem', () => {
  it('accepts relative POSIX paths', () => {
    for (const path of ['a.md', 'data/sales.csv', 'parsed/data/sales.csv.json', '.hidden', 'a..b/c', 'x'.repeat(MAX_PATH_CHARS)]) {
      expect(workspacePathProblem(path)).toBeUndefined();
    }
  });

  it('refuses every spelling that could leave the workspace or name it ambiguously', () => {
    expect(workspacePathProblem('')).toBe('is empty');
    expect(workspacePathProblem('x'.repeat(MAX_PATH_CHARS + 1))).toBe(`is longer than ${MAX_PATH_CHARS} characters`);
    expect(workspacePathProblem('/etc/passwd')).toBe('is absolute (it must be relative to the workspace)');
    expect(workspacePathProblem('c:/x')).toBe('starts with a drive letter (it must be relative to the workspace)');
    expect(workspacePathProblem('..')).toBe("contains '..'");
    expect(workspacePathProblem('a/../../b')).toBe("contains '..'");
    expect(workspacePathProblem('a\\..\\b')).toBe('contains a backslash (use / between folders)');
    expect(workspacePathProblem('./a')).toBe("contains a '.' segment");
    expect(workspacePathProblem('a/')).toBe("contains an empty segment ('//' or a trailing '/')");
    expect(workspacePathProblem('a\nb')).toBe('contains a control character');
    expect(workspacePathProblem('a\u0000b')).toBe('contains a control character');
  });
});
