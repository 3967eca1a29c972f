import type { Request } from 'express';

/** The parts of Express's router this reads: route layers, their path matcher and their methods. */
interface RouteLayer {
  route?: { _methods(): string[] };
  match(path: string): unknown;
}

/**
 * The methods the app serves at the request's path, read from the Express router the routes were
 * registered on (HEAD comes with GET). Empty when no route has this path.
 */
export function allowedMethods(req: Request): string[] {
  const stack = (req.app as unknown as { router?: { stack?: RouteLayer[] } }).router?.stack ?? [];
  const methods = new Set<string>();
  for (const layer of stack) {
    if (!layer.route) continue;
    let matched: unknown;
    try {
      matched = layer.match(req.path);
    } catch {
      // A path segment that does not decode matches no route.
      continue;
    }
    if (matched) for (const method of layer.route._methods()) methods.add(method);
  }
  return [...methods];
}
