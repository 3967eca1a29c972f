/**
 * One spelling per JSON value: object keys in sorted order at every depth, arrays in their order. Two
 * values equal as JSON give the same text, whatever order their keys were written or stored in.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  // Code-unit order, not localeCompare: the same on every machine and locale. fromEntries (not
  // assignment) keeps a key named `__proto__` an ordinary key, as JSON.parse made it.
  return Object.fromEntries(
    Object.keys(record)
      .sort()
      .map((key) => [key, sortKeys(record[key])]),
  );
}
