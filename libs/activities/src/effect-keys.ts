/** The step an effect key (`{workflow_id}:{step}:{digest}`, chosen by workflow code) belongs to, if it names one. */
export function stepOfKey(key: string): number | undefined {
  const parts = key.split(':');
  const step = Number(parts[parts.length - 2]);
  return Number.isInteger(step) ? step : undefined;
}
