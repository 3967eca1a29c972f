import type { NextFunction, Request, Response } from 'express';
import { problemOf, sendProblem } from './problem';

/*
 * What a browser could be made to do to the gateway from another site. Two checks: the Host header
 * must name the gateway (a page that rebinds its own name to the gateway's address still carries its
 * own name there), and a state-changing request signed in by the session cookie must come from the
 * gateway's own pages (the cookie is SameSite=Strict, but another port on the same host is the same
 * site).
 */

/** The names local mode answers to: the loopback addresses it listens on, under any port. */
export const LOOPBACK_HOST_NAMES = ['localhost', '127.0.0.1', '[::1]'] as const;

/**
 * Probes and Prometheus reach the health routes by the pod's address (a kubelet or a scraper sends
 * `Host: <pod IP>:<port>`), which no allow-list names; they answer nothing a page could use (metrics
 * carry no run ids or orgs), so they are not checked.
 */
export const HOST_CHECK_EXEMPT_PATHS: ReadonlySet<string> = new Set(['/livez', '/readyz', '/metrics']);

/** Methods that change state: the ones the origin check holds to the gateway's own pages. */
export const WRITE_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const NAME_RE = /^(?:\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*)$/;

/** A host name as the allow-list compares it: lowercase, without a trailing dot, IPv6 in brackets; undefined when it is not one. */
export function hostName(text: string): string | undefined {
  let name = text.trim().toLowerCase();
  if (!name.startsWith('[') && name.endsWith('.')) name = name.slice(0, -1);
  return NAME_RE.test(name) ? name : undefined;
}

/** The name part of a `Host` header (`name`, `name:port`, `[v6]:port`), or undefined when there is none or it is malformed. */
export function hostOfHeader(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^(\[[^\]]*\]|[^:]*)(?::(\d{1,5}))?$/.exec(header.trim());
  return m ? hostName(m[1]) : undefined;
}

/** The names the gateway answers to: the configured ones, and in local mode the loopback names too. */
export function allowedHostNames(config: { AGENTRUN_MODE: string; GATEWAY_ALLOWED_HOSTS: readonly string[] }): Set<string> {
  return new Set([...(config.AGENTRUN_MODE === 'local' ? LOOPBACK_HOST_NAMES : []), ...config.GATEWAY_ALLOWED_HOSTS]);
}

/**
 * The Host allow-list, as the first middleware: a request naming another host is a 421 before its
 * body is read or any route runs. The answer names neither the host sent nor the hosts allowed.
 */
export function hostAllowList(allowed: ReadonlySet<string>) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (HOST_CHECK_EXEMPT_PATHS.has(req.path)) return next();
    const name = hostOfHeader(req.headers.host);
    if (name !== undefined && allowed.has(name)) return next();
    sendProblem(
      res,
      problemOf(421, 'misdirected request', 'this gateway does not answer for the host named in the Host header; reach it by the name it is published under'),
    );
  };
}

/** An origin as browsers serialise it (`scheme://host[:port]`, default port left out), or undefined. */
function originOf(text: string): string | undefined {
  try {
    const origin = new URL(text).origin;
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
}

/**
 * The gateway's own origin as this request reached it: its scheme (`https` when the connection is
 * TLS, or when GATEWAY_TRUST_PROXY lets a proxy's X-Forwarded-Proto say so) and its Host header.
 */
export function ownOrigin(req: Request): string | undefined {
  const host = req.headers.host;
  return host ? originOf(`${req.protocol}://${host}`) : undefined;
}

/**
 * Whether a request comes from the gateway's own pages: its `Origin` is the gateway's own, or, when a
 * client sends no Origin, `Sec-Fetch-Site: same-origin`. Browsers send Origin with every POST, PUT,
 * PATCH and DELETE, so a page elsewhere (another port on the same host included) cannot pass.
 */
export function fromOwnOrigin(req: Request): boolean {
  const origin = req.header('origin');
  if (origin !== undefined) {
    const own = ownOrigin(req);
    return own !== undefined && originOf(origin) === own;
  }
  return req.header('sec-fetch-site')?.trim().toLowerCase() === 'same-origin';
}
