/**
 * A short, stable digest for idempotency keys (FNV-1a, 64-bit). Workflow code cannot use Node's
 * crypto; this needs no builtins and gives the same answer on every replay.
 */
export function digest(...parts: string[]): string {
  let hash = 0xcbf29ce484222325n;
  const prime = 0x100000001b3n;
  for (const char of parts.join('\u0000')) {
    hash ^= BigInt(char.codePointAt(0) ?? 0);
    hash = (hash * prime) & 0xffffffffffffffffn;
  }
  return hash.toString(16).padStart(16, '0');
}
