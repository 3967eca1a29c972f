import { callDirectives, DirectiveError, jsonValueEnd, withoutCallDirectives } from './call-directives';

describe('[call: <tool> <JSON arguments>] directives', () => {
  it('reads the tool and its arguments, in order, whatever brackets and strings the JSON holds', () => {
    const text = 'Fix it. [call: write_file {"path": "a].py", "content": "x = [1, [2]]\\n"}] then [call:exec {"command":"python3 -m pytest"}] [answer: fixed]';
    expect(callDirectives(text).map(({ tool, args }) => ({ tool, args }))).toEqual([
      { tool: 'write_file', args: { path: 'a].py', content: 'x = [1, [2]]\n' } },
      { tool: 'exec', args: { command: 'python3 -m pytest' } },
    ]);
    expect(withoutCallDirectives(text).replace(/\s+/g, ' ')).toBe('Fix it. then [answer: fixed]');
  });

  it('takes any JSON value, so a test can send a call whose arguments are not an object', () => {
    expect(callDirectives('[call: grep [1, 2]] [call: grep "x"] [call: grep 42] [call: grep null ]').map((d) => d.args)).toEqual([[1, 2], 'x', 42, null]);
  });

  it('escaped quotes and backslashes inside strings do not end the value', () => {
    expect(callDirectives('[call: write_file {"path": "q.txt", "content": "a \\"]\\" b \\\\"}]')[0].args).toEqual({ path: 'q.txt', content: 'a "]" b \\' });
  });

  it('refuses a directive with no tool, no complete value, bad JSON, or no closing bracket, naming where', () => {
    expect(() => callDirectives('x [call: {"a":1}]')).toThrow(/\[call: at character 2 names no tool/);
    expect(() => callDirectives('[call: exec {"command": "ls"')).toThrow(/\[call: exec at character 0 has no complete JSON value/);
    expect(() => callDirectives('[call: exec {command: ls}]')).toThrow(/its arguments are not JSON/);
    expect(() => callDirectives('[call: exec {"command": "ls"} trailing]')).toThrow(/does not end with \]/);
    expect(() => callDirectives('[call: exec {"a":1}')).toThrow(DirectiveError);
    expect(withoutCallDirectives('keep [call: exec {"a":1}')).toBe('keep [call: exec {"a":1}');
  });

  it('finds where a JSON value ends, or that it does not', () => {
    expect(jsonValueEnd('{"a": "}"} rest', 0)).toBe(10);
    expect(jsonValueEnd('[[], {}]]', 0)).toBe(8);
    expect(jsonValueEnd('"unterminated', 0)).toBeUndefined();
    expect(jsonValueEnd('true]', 0)).toBe(4);
    expect(jsonValueEnd('', 0)).toBeUndefined();
  });
});
