/**
 * `[call: <tool> <JSON arguments>]`: a scripted tool call. A directive ends at the `]` that follows a
 * complete JSON value, so the arguments may hold brackets, strings with `]` in them, nested objects.
 * The model server plays the directives it finds in a conversation's system (instructions), developer
 * and user (goal, case input) messages in order: with n tool results in the conversation it makes call
 * n+1, and after the last one it answers.
 */
export interface CallDirective {
  tool: string;
  /** The arguments as the directive wrote them, parsed (any JSON value: the caller decides what is valid). */
  args: unknown;
  /** Where the directive starts and ends in its text (end exclusive). */
  start: number;
  end: number;
}

export class DirectiveError extends Error {
  override readonly name = 'DirectiveError';
}

const OPENER = /\[call:\s*/gi;
const TOOL = /[A-Za-z0-9_.-]+/y;

/** Every `[call: ...]` directive in the text, in order; a malformed one is a DirectiveError naming it. */
export function callDirectives(text: string): CallDirective[] {
  const found: CallDirective[] = [];
  OPENER.lastIndex = 0;
  for (let open = OPENER.exec(text); open !== null; open = OPENER.exec(text)) {
    const start = open.index;
    TOOL.lastIndex = OPENER.lastIndex;
    const tool = TOOL.exec(text)?.[0];
    if (!tool) throw new DirectiveError(`[call: at character ${start} names no tool (expected [call: <tool> <JSON arguments>])`);
    const valueStart = skipSpace(text, TOOL.lastIndex);
    const valueEnd = jsonValueEnd(text, valueStart);
    if (valueEnd === undefined) throw new DirectiveError(`[call: ${tool} at character ${start} has no complete JSON value after the tool name`);
    let args: unknown;
    try {
      args = JSON.parse(text.slice(valueStart, valueEnd));
    } catch (err) {
      throw new DirectiveError(`[call: ${tool} at character ${start}: its arguments are not JSON (${(err as Error).message})`);
    }
    const close = skipSpace(text, valueEnd);
    if (text[close] !== ']') throw new DirectiveError(`[call: ${tool} at character ${start} does not end with ] after its JSON arguments`);
    found.push({ tool, args, start, end: close + 1 });
    OPENER.lastIndex = close + 1;
  }
  return found;
}

/** The text with every call directive taken out (for the words a reply quotes); unchanged when one is malformed. */
export function withoutCallDirectives(text: string): string {
  let directives: CallDirective[];
  try {
    directives = callDirectives(text);
  } catch (err) {
    if (err instanceof DirectiveError) return text;
    throw err;
  }
  let out = '';
  let at = 0;
  for (const d of directives) {
    out += `${text.slice(at, d.start)} `;
    at = d.end;
  }
  return out + text.slice(at);
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && /\s/.test(text[i])) i += 1;
  return i;
}

/**
 * Where the JSON value starting at `i` ends (exclusive), by its brackets and strings; undefined when the
 * text ends first. Only the extent is found here: JSON.parse judges the value itself.
 */
export function jsonValueEnd(text: string, i: number): number | undefined {
  const first = text[i];
  if (first === undefined) return undefined;
  if (first === '{' || first === '[') {
    let depth = 0;
    for (let j = i; j < text.length; j += 1) {
      const c = text[j];
      if (c === '"') {
        const end = stringEnd(text, j);
        if (end === undefined) return undefined;
        j = end - 1;
      } else if (c === '{' || c === '[') depth += 1;
      else if (c === '}' || c === ']') {
        depth -= 1;
        if (depth === 0) return j + 1;
      }
    }
    return undefined;
  }
  if (first === '"') return stringEnd(text, i);
  // A number, true, false or null: up to the next space or bracket.
  const m = /^[^\s\]]+/.exec(text.slice(i));
  return m ? i + m[0].length : undefined;
}

function stringEnd(text: string, i: number): number | undefined {
  for (let j = i + 1; j < text.length; j += 1) {
    if (text[j] === '\\') j += 1;
    else if (text[j] === '"') return j + 1;
  }
  return undefined;
}
