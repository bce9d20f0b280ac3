import type { IncomingMessage, ServerResponse } from 'node:http';
import { Inject, Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { DomainError, ErrorCode, type Problem } from '@llmgw/domain';
import { KIND_OF_CODE, PROBLEM_KINDS, PROBLEM_TYPE_BASE, ProblemError, type ProblemKind } from '@llmgw/observability';

/** Injection token of the admin API's {@link LeaderForwarder}. */
export const LEADER_FORWARDER = Symbol('llmgw.controller.leader-forwarder');

/** Set on a request a standby forwards: a controller that gets it and does not lead answers 503, never forwards again. */
export const FORWARDED_BY = 'x-llmgw-forwarded-by';

/** What the forwarder needs of leadership. */
export interface LeaderLookup {
  isLeader(): boolean;
  /** The admin base URL of the controller leading now (still renewing its claim), else undefined. */
  leaderAdminUrl(): Promise<string | undefined>;
}

/** An admin request as the forwarder reads it (Express's request, with its parsed JSON body). */
export type AdminRequest = IncomingMessage & { body?: unknown; originalUrl?: string };

/**
 * Admin changes (cordon, drain, gc collect, forget) reaching a standby are sent on to the leader
 * and answered with the leader's answer, so a shared address in front of every controller (a
 * Kubernetes Service, a load balancer) never answers 503 by luck. The caller's credential goes
 * along and the leader checks it; one hop at most. Reads are answered by whichever controller
 * got them.
 */
export class LeaderForwarder {
  constructor(
    private readonly leadership: LeaderLookup,
    private readonly selfId: string,
    private readonly send: typeof fetch = fetch,
    private readonly timeoutMs = 15_000,
  ) {}

  /** Which controller answers, for the `x-llmgw-controller` header: `<id> leader` or `<id> standby`. */
  answeredBy(): string {
    return `${this.selfId} ${this.leadership.isLeader() ? 'leader' : 'standby'}`;
  }

  /** `local()` on the leader; on a standby, the same request's answer from the leader. */
  async onLeader<T>(req: AdminRequest, local: () => Promise<T>): Promise<T> {
    if (this.leadership.isLeader()) return local();
    if (req.headers[FORWARDED_BY] !== undefined) {
      throw new DomainError(ErrorCode.Unavailable, 'this controller does not lead either: leadership moved while the change was forwarded; retry');
    }
    const base = await this.leadership.leaderAdminUrl();
    if (base === undefined) {
      throw new DomainError(ErrorCode.Unavailable, 'no controller leads right now (a takeover is under way, or the leader advertises no admin URL: LLMGW_CONTROLLER_ADVERTISE_ADMIN_URL); retry in a few seconds');
    }
    const headers: Record<string, string> = { [FORWARDED_BY]: this.selfId, accept: 'application/json' };
    if (typeof req.headers.authorization === 'string') headers.authorization = req.headers.authorization;
    let body: string | undefined;
    if (req.body !== undefined && req.method === 'POST' && typeof req.headers['content-type'] === 'string') {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(req.body);
    }
    let res: Response;
    let text: string;
    try {
      res = await this.send(`${base}${req.originalUrl ?? req.url ?? '/'}`, { method: req.method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(this.timeoutMs) });
      text = await res.text();
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name;
      throw new DomainError(ErrorCode.Unavailable, `the leader's admin API at ${base} did not answer (${cause}); retry`);
    }
    if (res.status >= 200 && res.status < 300) return (text === '' ? undefined : JSON.parse(text)) as T;
    throw leaderRefusal(res.status, text);
  }
}

/** The leader's problem answer, as this controller answers it: same kind, detail and problems. */
function leaderRefusal(status: number, text: string): Error {
  let doc: { type?: unknown; code?: unknown; detail?: unknown; problems?: unknown; currentRevision?: unknown } = {};
  try {
    doc = JSON.parse(text) as typeof doc;
  } catch {
    // Not a problem document: named below by its status.
  }
  const typed = typeof doc.type === 'string' && doc.type.startsWith(PROBLEM_TYPE_BASE) ? doc.type.slice(PROBLEM_TYPE_BASE.length) : undefined;
  const kind: ProblemKind | undefined =
    typed !== undefined && typed in PROBLEM_KINDS ? (typed as ProblemKind) : typeof doc.code === 'string' && doc.code in KIND_OF_CODE ? KIND_OF_CODE[doc.code as ErrorCode] : undefined;
  const detail = typeof doc.detail === 'string' ? doc.detail : `the leader answered HTTP ${status}`;
  if (kind === undefined) return new DomainError(status >= 500 ? ErrorCode.Unavailable : ErrorCode.InvalidArgument, detail);
  const problems = Array.isArray(doc.problems) ? (doc.problems as Problem[]).filter((p) => typeof p?.path === 'string' && typeof p?.message === 'string') : [];
  return new ProblemError(kind, detail, problems, typeof doc.currentRevision === 'number' ? { currentRevision: doc.currentRevision } : {});
}

/** Names the controller that answered every admin request (`x-llmgw-controller`), reads and forwarded changes alike. */
@Injectable()
export class AnsweredByInterceptor implements NestInterceptor {
  constructor(@Inject(LEADER_FORWARDER) private readonly forwarder: LeaderForwarder) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    context.switchToHttp().getResponse<ServerResponse>().setHeader('x-llmgw-controller', this.forwarder.answeredBy());
    return next.handle();
  }
}
