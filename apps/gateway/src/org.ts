import { createParamDecorator, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { ORG_PATTERN } from '@agentrun/contracts';
import type { Request } from 'express';
import { ProblemException } from './problem';

const orgRe = new RegExp(ORG_PATTERN);

type OrgRequest = Request & { org?: string };

/**
 * Local mode: the org is the `X-Org` header. Every route but health and docs needs one, and every
 * query below is scoped to it, so another org's run is indistinguishable from no run.
 */
@Injectable()
export class LocalOrgGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<OrgRequest>();
    const org = req.header('x-org');
    if (!org) throw new ProblemException(401, 'org required', 'send the X-Org header naming your org (local mode)');
    if (!orgRe.test(org)) throw new ProblemException(400, 'bad org', `X-Org must match ${ORG_PATTERN}`);
    req.org = org;
    return true;
  }
}

export const CurrentOrg = createParamDecorator((_: unknown, context: ExecutionContext): string => {
  const org = context.switchToHttp().getRequest<OrgRequest>().org;
  if (!org) throw new Error('CurrentOrg used on a route without LocalOrgGuard');
  return org;
});
