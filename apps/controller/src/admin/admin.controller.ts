import { Body, Controller, Delete, Get, Headers, HttpCode, Inject, Param, Post, Query, Req, UseGuards, UseInterceptors } from '@nestjs/common';
import { DomainError, ErrorCode, type Problem } from '@llmgw/domain';
import type { StoredEvent } from '@llmgw/store';
import { ProblemError } from '@llmgw/observability';
import { AdminGuard } from './admin.guard';
import { AdminService } from './admin.service';
import { AnsweredByInterceptor, LEADER_FORWARDER, type AdminRequest, type LeaderForwarder } from './leader.forwarder';
import type { GcCollectView, GcPlanView, NodeView, ReplicaView, StatusView } from '@llmgw/domain';

/** Injection token of the {@link AdminService}. */
export const ADMIN_SERVICE = Symbol('llmgw.controller.admin-service');

const CORDON_ACTIONS = ['cordon', 'uncordon', 'drain'] as const;

/**
 * The admin API `llmgw` talks to (shapes in apps/controller/README.md). Bearer token (or
 * loopback only without one); every error is application/problem+json (the app-wide
 * ProblemExceptionFilter).
 */
@Controller('v1/admin')
@UseGuards(AdminGuard)
@UseInterceptors(AnsweredByInterceptor)
export class AdminController {
  constructor(
    @Inject(ADMIN_SERVICE) private readonly admin: AdminService,
    @Inject(LEADER_FORWARDER) private readonly forwarder: LeaderForwarder,
  ) {}

  @Get('status')
  status(): Promise<StatusView> {
    return this.admin.status();
  }

  @Get('nodes')
  nodes(): { nodes: NodeView[] } {
    return { nodes: this.admin.nodes() };
  }

  @Get('replicas')
  replicas(@Query('model') model?: string): { replicas: ReplicaView[] } {
    return { replicas: this.admin.replicas(optionalText(model, 'model')) };
  }

  @Get('events')
  async events(
    @Query('model') model?: string,
    @Query('replica') replica?: string,
    @Query('node') node?: string,
    @Query('before') before?: string,
    @Query('limit') limit?: string,
  ): Promise<{ events: StoredEvent[] }> {
    const problems: Problem[] = [];
    const beforeId = optionalInt(before, 'before', 1, Number.MAX_SAFE_INTEGER, problems);
    const max = optionalInt(limit, 'limit', 1, 1000, problems);
    if (problems.length > 0) throw new DomainError(ErrorCode.InvalidArgument, problems.map((p) => `${p.path}: ${p.message}`).join('; '), problems);
    const query = {
      ...(optionalText(model, 'model') !== undefined ? { model } : {}),
      ...(optionalText(replica, 'replica') !== undefined ? { replicaId: replica } : {}),
      ...(optionalText(node, 'node') !== undefined ? { nodeId: node } : {}),
      ...(beforeId !== undefined ? { beforeId } : {}),
      ...(max !== undefined ? { limit: max } : {}),
    };
    return { events: await this.admin.listEvents(query) };
  }

  @Get('gc')
  gc(): GcPlanView {
    return this.admin.gc();
  }

  @Post('gc/collect')
  @HttpCode(200)
  collect(@Req() req: AdminRequest, @Headers('content-type') contentType: string | undefined, @Body() body: unknown): Promise<GcCollectView> {
    const targets = collectTargets(contentType, body);
    return this.forwarder.onLeader(req, () => this.admin.collect(targets));
  }

  /** Forgets a lost node (record and node credential); 409 for a node that is not lost. */
  @Delete('nodes/:id')
  @HttpCode(204)
  async forget(@Req() req: AdminRequest, @Param('id') id: string): Promise<void> {
    await this.forwarder.onLeader(req, () => this.admin.forget(id));
  }

  @Post('nodes/:id/:action')
  @HttpCode(200)
  async cordon(@Req() req: AdminRequest, @Param('id') id: string, @Param('action') action: string): Promise<{ node: NodeView }> {
    if (!(CORDON_ACTIONS as readonly string[]).includes(action)) {
      throw new DomainError(ErrorCode.NotFound, `no node action '${action}' (use ${CORDON_ACTIONS.join(', ')})`);
    }
    return this.forwarder.onLeader(req, async () => ({ node: await this.admin.cordon(id, action as (typeof CORDON_ACTIONS)[number]) }));
  }
}

function optionalText(value: unknown, name: string): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw new DomainError(ErrorCode.InvalidArgument, `${name}: give it once`, [{ path: name, message: 'give it once' }]);
  return value;
}

function optionalInt(value: unknown, name: string, min: number, max: number, problems: Problem[]): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    problems.push({ path: name, message: `expected a whole number ${min}..${max} (got ${JSON.stringify(value)})` });
    return undefined;
  }
  return n;
}

/**
 * What a collect may touch, from its body: `{"nodes": ["id", ...]}` (at least one) or
 * `{"all": true}`, nothing else. A body that is not `application/json` is a 415 (the body parser
 * leaves it unread, so it could not say which nodes were meant); a JSON body naming neither, or
 * both, or anything else, is a 422 naming the field. Deleting files needs an explicit scope.
 */
function collectTargets(contentType: string | undefined, body: unknown): { nodes: string[] } | { all: true } {
  const media = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (media !== 'application/json') {
    throw new ProblemError(
      'unsupported-media-type',
      `send the body as application/json (got ${contentType === undefined ? 'no Content-Type' : JSON.stringify(contentType)}): {"nodes": ["<node id>", ...]} or {"all": true}`,
    );
  }
  const refuse = (path: string, message: string): never => {
    throw new ProblemError('invalid-body', `${path}: ${message}`, [{ path, message }]);
  };
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return refuse('', 'expected {"nodes": ["<node id>", ...]} or {"all": true}');
  const fields = body as Record<string, unknown>;
  const extra = Object.keys(fields).find((k) => k !== 'nodes' && k !== 'all');
  if (extra !== undefined) return refuse(extra, 'unknown field (use "nodes" or "all")');
  const { nodes, all } = fields;
  if (nodes !== undefined && all !== undefined) return refuse('all', 'give "nodes" or "all", not both');
  if (all !== undefined) return all === true ? { all: true } : refuse('all', `must be true to collect on every node (got ${JSON.stringify(all)})`);
  if (nodes === undefined) return refuse('nodes', 'required: the node ids to collect on, or {"all": true} for every node');
  if (!Array.isArray(nodes) || nodes.length === 0) return refuse('nodes', 'expected a non-empty list of node ids');
  const bad = nodes.findIndex((n) => typeof n !== 'string' || n === '');
  if (bad >= 0) return refuse(`nodes[${bad}]`, 'expected a node id');
  return { nodes: [...new Set(nodes as string[])] };
}
