// Connect-ES's declarations (and CallOpts.headers) use the fetch API's `HeadersInit`, which
// only the DOM lib declares (@types/node does not): referenced here so that the package's types
// compile in a consumer whose tsconfig has `"lib": ["ES2022"]` alone (with skipLibCheck false).
/// <reference lib="dom" preserve="true" />
/// <reference types="node" preserve="true" />
import { create } from "@bufbuild/protobuf";
import { timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import {
  Code,
  ConnectError,
  createClient,
  type CallOptions,
  type Client,
  type Interceptor,
} from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

import type { RunEvent } from "./gen/frontdesk/v1/common_pb.js";
import {
  BusyPolicy,
  ConversationService,
  SendMessageRequestSchema,
  type Conversation,
  type GetConversationResponse,
  type IntakeState,
  type ListConversationsResponse,
  type SendMessageResponse,
  type ServiceCallState,
  type StartConversationResponse,
  type TurnResult,
} from "./gen/frontdesk/v1/conversation_pb.js";
import {
  HrMutationSchema,
  InvestigationService,
  InvestigationStatus,
  ManagerDecision,
  PendingActionStatus,
  ResponderRole,
  RespondRequestSchema,
  StartInvestigationRequestSchema,
  type AgentMessage,
  type AuditEntry,
  type HrMutation,
  type Investigation,
  type InvestigationProgress,
  type ListInvestigationsResponse,
  type ListPendingActionsResponse,
  type PendingAction,
  type StatusChange,
  type WatchInvestigationResponse,
} from "./gen/frontdesk/v1/investigation_pb.js";
import {
  AskRequestSchema,
  ResearchService,
  type AskResponse,
  type CriticVerdict,
  type ExpertAnswer,
  type ListResearchResponse,
  type OrchestratorMessage,
  type Plan,
  type Research,
  type ResearchResult,
} from "./gen/frontdesk/v1/research_pb.js";
import {
  TicketStatus,
  TriageService,
  TriageTicketRequestSchema,
  type GetTicketResponse,
  type ListTicketsResponse,
  type Ticket,
  type TicketResolution,
  type TriageResult,
  type TriageTicketResponse,
} from "./gen/frontdesk/v1/triage_pb.js";
import {
  SubscribeRunRequestSchema,
  WorkflowService,
  type DescribeWorkflowResponse,
  type ListLlmCallsResponse,
  type LlmCall,
  type SubscribeRunResponse,
  type Workflow,
} from "./gen/frontdesk/v1/workflow_pb.js";
import { FrontdeskError } from "./errors.js";
import {
  Budget,
  resolveRetryPolicy,
  resumingWatch,
  resumable,
  sleep,
  type RetryPolicy,
  type RunCall,
  type StreamProgress,
  type Unpacked,
} from "./retry.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:50051";

export interface FrontdeskClientOptions {
  /**
   * Server address as a URL: "http://host:port" (plaintext h2c) or "https://host:port" (TLS,
   * verified against Node's CA store unless `tls` names a CA).
   */
  baseUrl?: string;
  /**
   * API key (from `frontdesk-server keys create`), sent as `authorization: Bearer <key>` with
   * every call, retries and re-attaching streams included (a call given its own authorization
   * header keeps that). The client never shows it: not in `util.inspect`, `toString` or JSON.
   */
  apiKey?: string;
  /** TLS settings of an "https://" baseUrl: a private CA, a client certificate (mutual TLS). */
  tls?: TlsOptions;
  /** Headers sent with every call. */
  headers?: HeadersInit;
  /**
   * Default deadline of unary calls in milliseconds (streams have none unless given). A call's
   * deadline covers its retries.
   */
  timeoutMs?: number;
  /** Connect interceptors, run for every call. */
  interceptors?: Interceptor[];
  /**
   * How calls with an idempotency key are retried on UNAVAILABLE and ABORTED, and their broken
   * streams re-attached, and how watchInvestigation watches again after UNAVAILABLE: true or
   * omitted (the default policy, `DEFAULT_RETRY_POLICY`), a `RetryPolicy`, or false (never
   * retry, never re-attach, never watch again). Other calls without an idempotency key are
   * never retried.
   */
  retry?: RetryPolicy | boolean;
}

/** How a client connects over TLS (`FrontdeskClientOptions.tls`); PEM text or bytes. */
export interface TlsOptions {
  /** The CA certificate(s) that signed the server's certificate; omitted: Node's CA store. */
  ca?: string | Uint8Array;
  /** A client certificate, for mutual TLS (with `key`). */
  cert?: string | Uint8Array;
  /** The client certificate's private key. */
  key?: string | Uint8Array;
  /**
   * The name to verify the server's certificate against, when it differs from the baseUrl's
   * host (such as connecting by IP address to a certificate that names a host).
   */
  serverName?: string;
}

/** Per-call options: an AbortSignal to cancel, a deadline, extra headers. */
export interface CallOpts {
  signal?: AbortSignal;
  timeoutMs?: number;
  headers?: HeadersInit;
}

/**
 * What a SendMessage stream yields: every RunEvent in order, then one TurnResult.
 *
 * About `RunEvent.eventId`: it numbers the events of one *execution* of a run on one replica,
 * from 1. A run resumed after a crash, or taken over by another replica, starts again at 1 with
 * `runStarted.resumed` set, so (runId, eventId) alone is not a key across executions. Use it to
 * order one stream's events and to re-attach (`subscribeRun(runId, { afterEventId })`).
 */
export type StreamItem =
  | { type: "event"; event: RunEvent }
  | { type: "result"; result: TurnResult };

export type BusyPolicyName = "reject" | "queue";

/**
 * What a TriageTicket stream yields: the ticket-matching run's events (only when the customer has
 * active tickets), the TicketResolution, the ticket run's events in order, then one TriageResult.
 */
export type TriageItem =
  | { type: "resolution"; resolution: TicketResolution }
  | { type: "event"; event: RunEvent }
  | { type: "result"; result: TriageResult };

/** A ticket status filter for listTickets, by name or as the generated enum. */
export type TicketStatusFilter = "active" | "resolved" | "escalated" | TicketStatus;

function ticketStatus(status: TicketStatusFilter | undefined): TicketStatus {
  switch (status) {
    case undefined:
      return TicketStatus.UNSPECIFIED;
    case "active":
      return TicketStatus.ACTIVE;
    case "resolved":
      return TicketStatus.RESOLVED;
    case "escalated":
      return TicketStatus.ESCALATED;
    default:
      if (typeof status === "number") return status;
      throw new TypeError(`status must be "active", "resolved", "escalated" or a TicketStatus, not ${String(status)}`);
  }
}

/**
 * What a StartInvestigation or Respond stream yields: the run's events, each agent message and
 * status change right after the node event that produced it, then one Investigation.
 */
export type InvestigationItem =
  | { type: "event"; event: RunEvent }
  | { type: "message"; message: AgentMessage }
  | { type: "statusChange"; statusChange: StatusChange }
  | { type: "investigation"; investigation: Investigation };

/**
 * What an Ask stream yields: the run's events, each orchestrator message, plan, research result,
 * critic decision and expert answer right after the node event that produced it, then one
 * Research.
 */
export type ResearchItem =
  | { type: "event"; event: RunEvent }
  | { type: "message"; message: OrchestratorMessage }
  | { type: "plan"; plan: Plan }
  | { type: "researchResult"; researchResult: ResearchResult }
  | { type: "criticDecision"; criticDecision: CriticVerdict }
  | { type: "expertAnswer"; expertAnswer: ExpertAnswer }
  | { type: "research"; research: Research };

/** Options of ask (besides the per-call ones). */
export interface AskOpts {
  /** Rejections allowed before the question is given up; omitted: the default (5), at most 20. */
  retryLimit?: number;
  /** The document corpus to research; omitted: "sample", the shipped documents. */
  corpus?: string;
  /** A retried call with the same key and request returns the first call's outcome. */
  idempotencyKey?: string;
}

/**
 * An HR mutation given inline to startInvestigation (or pass an `HrMutation` message). Its id
 * must not be one of the imported HR data's unless the values are the same.
 */
export interface HrMutationInput {
  mutationId: string;
  /** The user who made the change. */
  changerId: string;
  /** The user the change is about. */
  targetUserId: string;
  /** The system changed, such as "Payroll". */
  system: string;
  /** The access level the change needs: "Read", "Write" or "Admin". */
  accessLevel: string;
  /** Such as "salary_change". */
  changeType: string;
  description?: string;
  changedAt: Date | Timestamp;
}

/** Who answers a pending action: "changer", "manager" or the generated enum. */
export type ResponderRoleName = "changer" | "manager" | ResponderRole;

/** The manager's decision: "approve", "deny" or the generated enum. */
export type ManagerDecisionName = "approve" | "deny" | ManagerDecision;

/** An investigation status filter: a name ("AWAITING_USER_RESPONSE", any case) or the enum. */
export type InvestigationStatusFilter =
  | keyof typeof InvestigationStatus
  | Lowercase<keyof typeof InvestigationStatus>
  | InvestigationStatus;

/** A pending-action status filter: "awaiting" (the default), "answered" or the enum. */
export type PendingActionStatusFilter = "awaiting" | "answered" | PendingActionStatus;

/** Answers a pending action (respond). */
export interface RespondInput {
  investigationId: string;
  /** The pending action answered (PendingAction.actionId). */
  actionId: string;
  role: ResponderRoleName;
  /** Must be the action's recipient. */
  responderId: string;
  /** The changer's clarification (required for the changer), or the manager's comment; at most 4,000 characters. */
  text?: string;
  /** Required for the manager. */
  decision?: ManagerDecisionName;
  idempotencyKey?: string;
}

function enumByName<E extends number>(
  value: string | number | undefined,
  enumObj: Record<string, string | number>,
  what: string,
  fallback?: E,
): E {
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value === "number") return value as E;
  if (typeof value === "string") {
    const v = enumObj[value.toUpperCase()];
    if (typeof v === "number" && v !== 0) return v as E;
  }
  throw new TypeError(`${what} must be a name or value of the enum, not ${String(value)}`);
}

function responderRole(role: ResponderRoleName): ResponderRole {
  return enumByName(role, ResponderRole, "role");
}

function managerDecision(decision: ManagerDecisionName | undefined): ManagerDecision {
  return enumByName(decision, ManagerDecision, "decision", ManagerDecision.UNSPECIFIED);
}

function investigationStatus(status: InvestigationStatusFilter | undefined): InvestigationStatus {
  return enumByName(status, InvestigationStatus, "status", InvestigationStatus.UNSPECIFIED);
}

function pendingActionStatus(status: PendingActionStatusFilter | undefined): PendingActionStatus {
  return enumByName(status, PendingActionStatus, "status", PendingActionStatus.UNSPECIFIED);
}

function hrMutation(input: HrMutationInput | HrMutation): HrMutation {
  if ("$typeName" in input) return input;
  const { changedAt, ...rest } = input;
  return create(HrMutationSchema, {
    ...rest,
    changedAt: changedAt instanceof Date ? timestampFromDate(changedAt) : changedAt,
  });
}

/**
 * The FrontdeskError reason of a message sent to a conversation that has ended (a service call
 * that was hung up): FAILED_PRECONDITION.
 */
export const CONVERSATION_ENDED = "CONVERSATION_ENDED";

/**
 * The FrontdeskError reason of a call without an API key, or with one that is unknown,
 * malformed or revoked: UNAUTHENTICATED.
 */
export const UNAUTHENTICATED = "UNAUTHENTICATED";

/**
 * The FrontdeskError reason of a call whose API key lacks the scope the method needs:
 * PERMISSION_DENIED; `errorMetadata.scope` names it, such as "triage:write".
 */
export const SCOPE_MISSING = "SCOPE_MISSING";

/**
 * The FrontdeskError reason of a call over one of the tenant's quotas: RESOURCE_EXHAUSTED, with
 * `retryDelayMs` saying when to try again; `errorMetadata.quota` names the quota
 * ("requests_per_sec" or "max_concurrent_runs"). The client does not retry it.
 */
export const QUOTA_EXCEEDED = "QUOTA_EXCEEDED";

/** The conversation's state when it is an intake conversation, undefined otherwise. */
export function intakeState(conversation: Conversation | undefined): IntakeState | undefined {
  const state = conversation?.state;
  return state?.case === "intake" ? state.value : undefined;
}

/**
 * The conversation's state when it is a service call (the current node, the context as JSON,
 * the node traversal path, the mandatory fields still missing, whether the call has ended,
 * model calls and tokens), undefined otherwise.
 */
export function serviceCallState(conversation: Conversation | undefined): ServiceCallState | undefined {
  const state = conversation?.state;
  return state?.case === "serviceCall" ? state.value : undefined;
}

/** A service call's context (`ServiceCallState.contextJson`) as an object; empty when it has none. */
export function serviceCallContext(state: ServiceCallState): Record<string, unknown> {
  if (state.contextJson === "") return {};
  const value: unknown = JSON.parse(state.contextJson);
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

/** The kind of a RunEvent: "runStarted", "nodeStarted", "tokenDelta", ..., "runFinished". */
export function eventKind(event: RunEvent): NonNullable<RunEvent["kind"]["case"]> | "unknown" {
  return event.kind.case ?? "unknown";
}

/**
 * What every streamed call of this client shares: it can be iterated once; it hands out nothing
 * once the call's signal has aborted, not even what had arrived before the call noticed, as a
 * cancelled Go context does; and it keeps what ended it, for result() or all() to throw again.
 */
abstract class OnceStream<R, T> implements AsyncIterable<T> {
  private started = false;
  /** The error that ended the stream. */
  private failure: FrontdeskError | undefined;
  private stoppedEarly = false;

  constructor(
    private readonly source: AsyncIterable<R>,
    private readonly signal: AbortSignal | undefined,
    protected readonly kindName: string,
  ) {}

  /** The item a response carries, if any, after recording what else it says. */
  protected abstract take(response: R): T | undefined;

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.started) throw new Error(`${this.kindName} can be iterated only once`);
    this.started = true;
    let ended = false;
    try {
      for await (const response of this.source) {
        if (this.signal?.aborted) throw FrontdeskError.of(Code.Canceled, `${this.kindName}'s signal was aborted`);
        const item = this.take(response);
        if (item === undefined) continue;
        yield item;
      }
      ended = true;
    } catch (e) {
      ended = true;
      this.failure = FrontdeskError.from(e);
      throw this.failure;
    } finally {
      // Reached without `ended` when the caller's loop stopped early, which cancelled the call.
      this.stoppedEarly = !ended;
    }
  }

  /** Consumes the rest of the stream, unless a loop over it came first. */
  protected async drain(): Promise<void> {
    if (!this.started) {
      for await (const _ of this) {
        // drain
      }
    }
  }

  /**
   * Throws what ended the stream before its end: the failure, or CANCELLED after a loop over it
   * stopped early ("... stopped before `what`"); returns when it ended normally.
   */
  protected throwIfCut(what: string): void {
    if (this.failure !== undefined) throw this.failure;
    if (this.stoppedEarly) {
      throw FrontdeskError.of(Code.Canceled, `${this.kindName} was cancelled: the loop over it stopped before ${what}`);
    }
  }
}

/** What every stream of a call that runs a workflow shares: its progress counters. */
abstract class RunStream<I> extends OnceStream<I, I> implements StreamProgress {
  /**
   * Events received so far (each once, also across retries and re-attaches). Their `eventId`
   * numbers one execution of the run, from 1: a run resumed after a crash or taken over by
   * another replica starts again at 1 (with `runStarted.resumed` set).
   */
  readonly events: RunEvent[] = [];
  private readonly counters: { attempts: number; reattaches: number; skippedEvents: number };

  constructor(call: RunCall<unknown, I>, kindName: string) {
    const counters = { attempts: 1, reattaches: 0, skippedEvents: 0 };
    super(resumable(call, counters), call.signal, kindName);
    this.counters = counters;
  }

  /** How many times the call was made (1 unless it was retried or its result fetched again). */
  get attempts(): number {
    return this.counters.attempts;
  }

  /** How many times the stream re-attached to its run with SubscribeRun. */
  get reattaches(): number {
    return this.counters.reattaches;
  }

  /** Events the server no longer held when the stream re-attached (0 normally). */
  get skippedEvents(): number {
    return this.counters.skippedEvents;
  }

  protected take(item: I): I {
    this.record(item);
    return item;
  }

  protected abstract record(item: I): void;

  /**
   * Consumes what is left of the stream (all of it, unless a loop over it came first) and
   * returns the call's result, which `recorded` reads from what `record` kept; without one,
   * throws what ended the stream, again for every call.
   */
  protected async outcome<R>(recorded: () => R | undefined): Promise<R> {
    await this.drain();
    const result = recorded();
    if (result !== undefined) return result;
    this.throwIfCut("its result arrived");
    throw new Error(`result() of ${this.kindName} called while a loop over it is still running`);
  }
}

/**
 * One SendMessage call. `for await` over it for each RunEvent as it arrives, then the
 * TurnResult; or `await stream.result()`. Breaking out of the loop, or aborting the
 * signal given to sendMessage, cancels the call. Errors are thrown as FrontdeskError. With an
 * idempotency key the call is retried, and a broken stream re-attached, as the client's retry
 * policy says; each event is delivered once.
 */
export class TurnStream extends RunStream<StreamItem> {
  private turnResult: TurnResult | undefined;

  /** @internal */
  constructor(call: RunCall<SendMessageResponse, StreamItem>) {
    super(call as RunCall<unknown, StreamItem>, "a TurnStream");
  }

  protected record(item: StreamItem): void {
    if (item.type === "event") this.events.push(item.event);
    else this.turnResult = item.result;
  }

  /** Consumes the rest of the stream and returns the turn's result. */
  async result(): Promise<TurnResult> {
    return this.outcome(() => this.turnResult);
  }
}

/**
 * One TriageTicket call. `for await` over it for the ticket-matching run's events (when the
 * customer has active tickets), the TicketResolution (which ticket the message belongs to), each
 * RunEvent of the ticket's run as it arrives, then the TriageResult; or `await stream.result()`.
 * Breaking out of the loop, or aborting the signal given to triageTicket, cancels the call.
 * Errors are thrown as FrontdeskError. Retries and re-attaching as for a TurnStream (the
 * resolution is delivered once).
 */
export class TriageStream extends RunStream<TriageItem> {
  /** The ticket resolution, once it has arrived (after the ticket-matching run's events, if any). */
  resolution: TicketResolution | undefined;
  private triageResult: TriageResult | undefined;

  /** @internal */
  constructor(call: RunCall<TriageTicketResponse, TriageItem>) {
    super(call as RunCall<unknown, TriageItem>, "a TriageStream");
  }

  protected record(item: TriageItem): void {
    if (item.type === "resolution") this.resolution = item.resolution;
    else if (item.type === "event") this.events.push(item.event);
    else this.triageResult = item.result;
  }

  /** Consumes the rest of the stream and returns the triage result. */
  async result(): Promise<TriageResult> {
    return this.outcome(() => this.triageResult);
  }
}

/**
 * One StartInvestigation or Respond call. `for await` over it for each RunEvent, AgentMessage
 * and StatusChange as the run produces them, then the Investigation as the run left it
 * (finished, or awaiting a reply); or `await stream.result()`. Breaking out of the loop, or
 * aborting the signal given to the call, cancels it. Errors are thrown as FrontdeskError.
 * Retries and re-attaching as for a TurnStream; while re-attached only RunEvents arrive (the
 * Investigation holds every message and status change).
 */
export class InvestigationStream extends RunStream<InvestigationItem> {
  /** Agent messages received so far. */
  readonly messages: AgentMessage[] = [];
  /** Status changes received so far. */
  readonly statusChanges: StatusChange[] = [];
  private investigation: Investigation | undefined;

  /** @internal */
  constructor(call: RunCall<{ progress?: InvestigationProgress }, InvestigationItem>) {
    super(call as RunCall<unknown, InvestigationItem>, "an InvestigationStream");
  }

  protected record(item: InvestigationItem): void {
    switch (item.type) {
      case "event":
        this.events.push(item.event);
        break;
      case "message":
        this.messages.push(item.message);
        break;
      case "statusChange":
        this.statusChanges.push(item.statusChange);
        break;
      case "investigation":
        this.investigation = item.investigation;
        break;
    }
  }

  /** Consumes the rest of the stream and returns the investigation. */
  async result(): Promise<Investigation> {
    return this.outcome(() => this.investigation);
  }
}

/**
 * One Ask call. `for await` over it for each RunEvent, OrchestratorMessage, Plan,
 * ResearchResult, CriticVerdict and ExpertAnswer as the run produces them, then the Research
 * (its outcome, final answer and reasoning trace); or `await stream.result()`. Breaking out of
 * the loop, or aborting the signal given to ask, cancels the call. Errors are thrown as
 * FrontdeskError. Retries and re-attaching as for a TurnStream; while re-attached only
 * RunEvents arrive (the Research holds the plans, the results and the messages).
 */
export class ResearchStream extends RunStream<ResearchItem> {
  /** Orchestrator messages received so far. */
  readonly messages: OrchestratorMessage[] = [];
  /** Plans received so far (a rejected plan is followed by a new one). */
  readonly plans: Plan[] = [];
  /** Research results received so far, as they finished (Research.results is in plan order). */
  readonly results: ResearchResult[] = [];
  /** Critic decisions received so far. */
  readonly criticDecisions: CriticVerdict[] = [];
  /** Expert answers received so far. */
  readonly expertAnswers: ExpertAnswer[] = [];
  private research: Research | undefined;

  /** @internal */
  constructor(call: RunCall<AskResponse, ResearchItem>) {
    super(call as RunCall<unknown, ResearchItem>, "a ResearchStream");
  }

  protected record(item: ResearchItem): void {
    switch (item.type) {
      case "event":
        this.events.push(item.event);
        break;
      case "message":
        this.messages.push(item.message);
        break;
      case "plan":
        this.plans.push(item.plan);
        break;
      case "researchResult":
        this.results.push(item.researchResult);
        break;
      case "criticDecision":
        this.criticDecisions.push(item.criticDecision);
        break;
      case "expertAnswer":
        this.expertAnswers.push(item.expertAnswer);
        break;
      case "research":
        this.research = item.research;
        break;
    }
  }

  /** Consumes the rest of the stream and returns the research. */
  async result(): Promise<Research> {
    return this.outcome(() => this.research);
  }
}

/**
 * What SubscribeRun's and WatchInvestigation's streams share: what arrived so far, and all(),
 * which like result() of a run's stream throws what ended it.
 */
abstract class ListenStream<R, T> extends OnceStream<R, T> {
  protected readonly received: T[] = [];

  /** The item a response carries, if any, after counting what else it says. */
  protected abstract carried(response: R): T | undefined;

  protected take(response: R): T | undefined {
    const item = this.carried(response);
    if (item !== undefined) this.received.push(item);
    return item;
  }

  /**
   * Consumes what is left of the stream and returns every item; a stream that did not reach its
   * end throws what ended it instead (CANCELLED after a loop over it stopped early), again for
   * every call, so a partial list is never taken for the whole.
   */
  async all(): Promise<T[]> {
    await this.drain();
    this.throwIfCut("its end");
    return this.received;
  }
}

/**
 * One SubscribeRun call: `for await` yields the run's events after the event id given, then its
 * live ones; it ends after the run's last event (runFinished, runFailed or runInterrupted).
 * `skipped` counts the events the server no longer held. Breaking out of the loop, or aborting
 * the signal, cancels the call. Errors are thrown as FrontdeskError (NOT_FOUND for a run the
 * server does not know). Never retried.
 */
export class RunEventStream extends ListenStream<SubscribeRunResponse, RunEvent> {
  /** Events the server no longer held between the id asked for and the next event. */
  skipped = 0;

  constructor(responses: AsyncIterable<SubscribeRunResponse>, signal?: AbortSignal) {
    super(responses, signal, "a RunEventStream");
  }

  /** Events received so far. */
  get events(): RunEvent[] {
    return this.received;
  }

  protected carried(response: SubscribeRunResponse): RunEvent | undefined {
    this.skipped += Number(response.skipped);
    return response.event;
  }
}

/**
 * One WatchInvestigation: `for await` yields each AuditEntry, the trail written so far first,
 * then each new one as it is written; it ends once the advisory report is generated. A call cut
 * with UNAVAILABLE (a server shutting down, reason SHUTTING_DOWN, or a broken connection) is
 * made again from the last seq delivered, under the client's retry policy; each entry is
 * yielded once. Breaking out of the loop, or aborting the signal, cancels the call. Errors are
 * thrown as FrontdeskError.
 */
export class AuditStream extends ListenStream<WatchInvestigationResponse, AuditEntry> {
  constructor(responses: AsyncIterable<WatchInvestigationResponse>, signal?: AbortSignal) {
    super(responses, signal, "an AuditStream");
  }

  /** Entries received so far. */
  get entries(): AuditEntry[] {
    return this.received;
  }

  protected carried(response: WatchInvestigationResponse): AuditEntry | undefined {
    return response.entry;
  }
}

/** PEM given as text or bytes, as node:tls takes it. */
function pem(value: string | Uint8Array): string | Buffer {
  return typeof value === "string" ? value : Buffer.from(value);
}

/** The interceptor that sends `key` with every call that has no authorization header. */
function bearer(key: string): Interceptor {
  const trimmed = key.trim();
  // Checked here, where the error cannot show the key; a header value must be visible ASCII.
  if (!/^[\x21-\x7e]+$/.test(trimmed)) {
    throw new TypeError("apiKey must be non-empty visible ASCII (a key from `frontdesk-server keys create`)");
  }
  const value = `Bearer ${trimmed}`;
  return (next) => (req) => {
    if (!req.header.has("authorization")) req.header.set("authorization", value);
    return next(req);
  };
}

/**
 * Client for Frontdesk's ConversationService, TriageService, InvestigationService,
 * ResearchService and WorkflowService over gRPC (HTTP/2), built on Connect-ES. The generated
 * Connect clients are `conversations`, `triage`, `investigations`, `research` and `workflows`.
 * Call close() when done, to release the HTTP/2 connection.
 *
 * A server that requires API keys refuses a call without a valid one as UNAUTHENTICATED
 * (reason `UNAUTHENTICATED`), one whose key lacks the method's scope as PERMISSION_DENIED
 * (`SCOPE_MISSING`, `errorMetadata.scope` naming it), and a tenant over a quota as
 * RESOURCE_EXHAUSTED (`QUOTA_EXCEEDED`, with `retryDelayMs`). None of them is retried.
 */
export class FrontdeskClient {
  readonly conversations: Client<typeof ConversationService>;
  readonly workflows: Client<typeof WorkflowService>;
  readonly triage: Client<typeof TriageService>;
  readonly investigations: Client<typeof InvestigationService>;
  readonly research: Client<typeof ResearchService>;
  private readonly sessions: Http2SessionManager;
  // True private fields: util.inspect and JSON.stringify do not see them (they may hold a key).
  readonly #headers: HeadersInit | undefined;
  readonly #description: string;
  private readonly timeoutMs: number | undefined;
  private readonly retry: Required<RetryPolicy> | undefined;

  constructor(options: FrontdeskClientOptions = {}) {
    this.retry = resolveRetryPolicy(options.retry);
    const baseUrl = options.baseUrl ?? DEFAULT_BASE_URL;
    const tls = options.tls;
    if (tls !== undefined && !baseUrl.startsWith("https://")) {
      throw new TypeError(`tls needs an https:// baseUrl, not ${baseUrl}`);
    }
    if ((tls?.cert === undefined) !== (tls?.key === undefined)) {
      throw new TypeError("tls.cert and tls.key go together (mutual TLS)");
    }
    this.sessions = new Http2SessionManager(baseUrl, undefined, tls && {
      ca: tls.ca === undefined ? undefined : pem(tls.ca),
      cert: tls.cert === undefined ? undefined : pem(tls.cert),
      key: tls.key === undefined ? undefined : pem(tls.key),
      servername: tls.serverName,
    });
    const interceptors = [...(options.interceptors ?? [])];
    if (options.apiKey !== undefined) interceptors.unshift(bearer(options.apiKey));
    const transport = createGrpcTransport({
      baseUrl,
      sessionManager: this.sessions,
      interceptors,
    });
    this.conversations = createClient(ConversationService, transport);
    this.workflows = createClient(WorkflowService, transport);
    this.triage = createClient(TriageService, transport);
    this.investigations = createClient(InvestigationService, transport);
    this.research = createClient(ResearchService, transport);
    this.#headers = options.headers;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    const key = options.apiKey === undefined ? "none" : "<redacted>";
    this.#description = `FrontdeskClient(${baseUrl}, apiKey: ${key})`;
  }

  /** Where the client connects and whether it sends a key; never the key. */
  toString(): string {
    return this.#description;
  }

  toJSON(): string {
    return this.#description;
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.#description;
  }

  /** Closes the HTTP/2 connection; calls in flight fail. */
  close(): void {
    this.sessions.abort();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  private opts(o: CallOpts | undefined, unary: boolean): CallOptions {
    const headers = new Headers(this.#headers);
    new Headers(o?.headers).forEach((v, k) => headers.set(k, v));
    return {
      signal: o?.signal,
      timeoutMs: o?.timeoutMs ?? (unary ? this.timeoutMs : undefined),
      headers,
    };
  }

  private async unary<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (e) {
      throw FrontdeskError.from(e);
    }
  }

  /**
   * One unary call with an idempotency key: retried per the retry policy (when `key` is not
   * empty) within one deadline, each attempt with what is left of it.
   */
  private async keyedUnary<T>(
    key: string,
    o: CallOpts | undefined,
    call: (options: CallOptions) => Promise<T>,
  ): Promise<T> {
    const base = this.opts(o, true);
    const budget = new Budget(
      key !== "" ? this.retry : undefined,
      base.timeoutMs === undefined ? undefined : Date.now() + base.timeoutMs,
    );
    for (;;) {
      let err: FrontdeskError;
      try {
        return await call({ ...base, timeoutMs: budget.timeoutMs() });
      } catch (e) {
        err = FrontdeskError.from(e);
      }
      const wait = budget.delay(err);
      if (wait === undefined || o?.signal?.aborted) throw err;
      budget.calls += 1;
      budget.waitedMs += wait;
      await sleep(wait, o?.signal);
    }
  }

  /** How a streamed call is made and re-attached. */
  private runCall<R, I>(
    what: string,
    key: string,
    o: CallOpts | undefined,
    open: (options: CallOptions) => AsyncIterable<R>,
    unpack: (response: R) => Unpacked<I>,
    eventItem: (event: RunEvent) => I,
  ): RunCall<R, I> {
    const base = this.opts(o, false);
    return {
      what,
      open: (timeoutMs) => open({ ...base, timeoutMs }),
      subscribe: (runId, afterEventId, timeoutMs) =>
        this.workflows.subscribeRun(
          create(SubscribeRunRequestSchema, { runId, afterEventId }),
          { ...base, timeoutMs },
        ),
      unpack,
      eventItem,
      policy: key !== "" ? this.retry : undefined,
      timeoutMs: base.timeoutMs,
      signal: o?.signal,
    };
  }

  /** Creates a conversation; resolves to { conversation, welcome }. */
  startConversation(
    req: { workflow?: string; conversationId?: string; idempotencyKey?: string } = {},
    o?: CallOpts,
  ): Promise<StartConversationResponse> {
    const idempotencyKey = req.idempotencyKey ?? "";
    return this.keyedUnary(idempotencyKey, o, (options) =>
      this.conversations.startConversation(
        {
          workflow: req.workflow ?? "intake",
          conversationId: req.conversationId ?? "",
          idempotencyKey,
        },
        options,
      ),
    );
  }

  /**
   * Sends one user turn and streams the run: `for await (const item of stream)` yields
   * `{type: "event", event}` for each RunEvent, then `{type: "result", result}`.
   */
  sendMessage(
    conversationId: string,
    text: string,
    o?: CallOpts & { idempotencyKey?: string; busyPolicy?: BusyPolicyName },
  ): TurnStream {
    const busy =
      o?.busyPolicy === "queue"
        ? BusyPolicy.QUEUE
        : o?.busyPolicy === "reject"
          ? BusyPolicy.REJECT
          : BusyPolicy.UNSPECIFIED;
    const request = create(SendMessageRequestSchema, {
      conversationId,
      text,
      idempotencyKey: o?.idempotencyKey ?? "",
      busyPolicy: busy,
    });
    return new TurnStream(
      this.runCall(
        "SendMessage",
        request.idempotencyKey,
        o,
        (options) => this.conversations.sendMessage(request, options),
        (response: SendMessageResponse): Unpacked<StreamItem> => {
          const p = response.payload;
          if (p.case === "event") return { kind: "event", event: p.value, item: { type: "event", event: p.value } };
          if (p.case === "result") return { kind: "result", item: { type: "result", result: p.value } };
          return undefined; // a payload kind newer than this client is skipped
        },
        (event) => ({ type: "event", event }),
      ),
    );
  }

  /** The conversation and its whole message history, oldest first. */
  getConversation(conversationId: string, o?: CallOpts): Promise<GetConversationResponse> {
    return this.unary(() =>
      this.conversations.getConversation({ conversationId }, this.opts(o, true)),
    );
  }

  /** One page of conversations, in the server's order; nextPageToken is "" on the last page. */
  listConversations(
    req: { workflow?: string; pageSize?: number; pageToken?: string } = {},
    o?: CallOpts,
  ): Promise<ListConversationsResponse> {
    return this.unary(() => this.conversations.listConversations(req, this.opts(o, true)));
  }

  /** Every conversation, in the server's order, fetching pages as needed. */
  async *allConversations(
    req: { workflow?: string; pageSize?: number } = {},
    o?: CallOpts,
  ): AsyncGenerator<Conversation> {
    let pageToken = "";
    do {
      const page = await this.listConversations({ ...req, pageToken }, o);
      yield* page.conversations;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  /** Clears a conversation's messages and request fields. */
  async resetConversation(
    conversationId: string,
    o?: CallOpts & { idempotencyKey?: string },
  ): Promise<Conversation | undefined> {
    const idempotencyKey = o?.idempotencyKey ?? "";
    const res = await this.keyedUnary(idempotencyKey, o, (options) =>
      this.conversations.resetConversation({ conversationId, idempotencyKey }, options),
    );
    return res.conversation;
  }

  /** Erases a conversation with every checkpoint and message. */
  async deleteConversation(conversationId: string, o?: CallOpts): Promise<void> {
    await this.unary(() =>
      this.conversations.deleteConversation({ conversationId }, this.opts(o, true)),
    );
  }

  /**
   * Triages one customer message and streams the run: `for await (const item of stream)`
   * yields `{type: "resolution", resolution}`, then `{type: "event", event}` for each RunEvent,
   * then `{type: "result", result}`. `language` is an ISO 639-1 hint (detected when omitted).
   */
  triageTicket(
    customerId: string,
    message: string,
    o?: CallOpts & { subject?: string; language?: string; idempotencyKey?: string },
  ): TriageStream {
    const request = create(TriageTicketRequestSchema, {
      customerId,
      message,
      subject: o?.subject ?? "",
      language: o?.language ?? "",
      idempotencyKey: o?.idempotencyKey ?? "",
    });
    return new TriageStream(
      this.runCall(
        "TriageTicket",
        request.idempotencyKey,
        o,
        (options) => this.triage.triageTicket(request, options),
        (response: TriageTicketResponse): Unpacked<TriageItem> => {
          const p = response.payload;
          if (p.case === "resolution") return { kind: "resolution", item: { type: "resolution", resolution: p.value } };
          if (p.case === "event") return { kind: "event", event: p.value, item: { type: "event", event: p.value } };
          if (p.case === "result") return { kind: "result", item: { type: "result", result: p.value } };
          return undefined;
        },
        (event) => ({ type: "event", event }),
      ),
    );
  }

  /**
   * One of the customer's tickets, active or archived: `ticket`, `messages` and the latest
   * `result`. Another customer's ticket is NOT_FOUND.
   */
  getTicket(customerId: string, ticketId: string, o?: CallOpts): Promise<GetTicketResponse> {
    return this.unary(() => this.triage.getTicket({ customerId, ticketId }, this.opts(o, true)));
  }

  /**
   * One page of the customer's archived tickets, most recently completed first; `status`
   * "resolved" or "escalated" filters ("active" lists the active tickets, unpaged).
   * nextPageToken is "" on the last page.
   */
  async listTickets(
    customerId: string,
    req: { status?: TicketStatusFilter; pageSize?: number; pageToken?: string } = {},
    o?: CallOpts,
  ): Promise<ListTicketsResponse> {
    const status = ticketStatus(req.status);
    return this.unary(() =>
      this.triage.listTickets(
        { customerId, status, pageSize: req.pageSize ?? 0, pageToken: req.pageToken ?? "" },
        this.opts(o, true),
      ),
    );
  }

  /** Every archived ticket of the customer (or those of `status`), fetching pages as needed. */
  async *allTickets(
    customerId: string,
    req: { status?: TicketStatusFilter; pageSize?: number } = {},
    o?: CallOpts,
  ): AsyncGenerator<Ticket> {
    let pageToken = "";
    do {
      const page = await this.listTickets(customerId, { ...req, pageToken }, o);
      yield* page.tickets;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  /** The customer's active tickets (awaiting a specialist or a follow-up). */
  async listActiveTickets(customerId: string, o?: CallOpts): Promise<Ticket[]> {
    const res = await this.unary(() =>
      this.triage.listActiveTickets({ customerId }, this.opts(o, true)),
    );
    return res.tickets;
  }

  /**
   * Starts the investigation of an HR mutation: a mutation id of the imported HR data ("1002"),
   * or a mutation given inline (recorded with the HR data). `for await` over the stream for
   * `{type: "event"}`, `{type: "message"}` and `{type: "statusChange"}` items, then
   * `{type: "investigation"}`; or `await stream.result()`. A second investigation of a mutation
   * is ALREADY_EXISTS, an unknown mutation id NOT_FOUND.
   */
  startInvestigation(
    mutation: string | HrMutationInput | HrMutation,
    o?: CallOpts & { idempotencyKey?: string },
  ): InvestigationStream {
    const request = create(StartInvestigationRequestSchema, {
      mutation:
        typeof mutation === "string"
          ? { case: "mutationId", value: mutation }
          : { case: "inlineMutation", value: hrMutation(mutation) },
      idempotencyKey: o?.idempotencyKey ?? "",
    });
    return new InvestigationStream(
      this.investigationCall(request.idempotencyKey, o, (options) =>
        this.investigations.startInvestigation(request, options),
      ),
    );
  }

  /**
   * Answers a pending action: the changer's clarification (`role: "changer"`, `text`) or the
   * manager's decision (`role: "manager"`, `decision: "approve" | "deny"`). Streams the
   * continuation like startInvestigation. Anyone but the action's recipient, or the wrong role,
   * is PERMISSION_DENIED (reason WRONG_RESPONDER); an answered action FAILED_PRECONDITION
   * (reason INTERRUPT_ANSWERED).
   */
  respond(req: RespondInput, o?: CallOpts): InvestigationStream {
    const request = create(RespondRequestSchema, {
      investigationId: req.investigationId,
      actionId: req.actionId,
      role: responderRole(req.role),
      responderId: req.responderId,
      text: req.text ?? "",
      decision: managerDecision(req.decision),
      idempotencyKey: req.idempotencyKey ?? "",
    });
    return new InvestigationStream(
      this.investigationCall(request.idempotencyKey, o, (options) =>
        this.investigations.respond(request, options),
      ),
    );
  }

  private investigationCall(
    key: string,
    o: CallOpts | undefined,
    open: (options: CallOptions) => AsyncIterable<{ progress?: InvestigationProgress }>,
  ): RunCall<{ progress?: InvestigationProgress }, InvestigationItem> {
    return this.runCall(
      "investigation",
      key,
      o,
      open,
      (response): Unpacked<InvestigationItem> => {
        const p = response.progress?.payload;
        switch (p?.case) {
          case "event":
            return { kind: "event", event: p.value, item: { type: "event", event: p.value } };
          case "message":
            return { kind: "derived", item: { type: "message", message: p.value } };
          case "statusChange":
            return { kind: "derived", item: { type: "statusChange", statusChange: p.value } };
          case "investigation":
            return { kind: "result", item: { type: "investigation", investigation: p.value } };
          default:
            return undefined;
        }
      },
      (event) => ({ type: "event", event }),
    );
  }

  /** The investigation ("INV-<mutation id>") as it stands; an unknown one is NOT_FOUND. */
  async getInvestigation(investigationId: string, o?: CallOpts): Promise<Investigation> {
    const res = await this.unary(() =>
      this.investigations.getInvestigation({ investigationId }, this.opts(o, true)),
    );
    if (res.investigation === undefined) {
      throw new FrontdeskError(
        new ConnectError("GetInvestigation answered without an investigation", Code.Internal),
      );
    }
    return res.investigation;
  }

  /**
   * One page of investigations, most recently started first; `status` filters (omitted: every
   * status). nextPageToken is "" on the last page.
   */
  async listInvestigations(
    req: { status?: InvestigationStatusFilter; pageSize?: number; pageToken?: string } = {},
    o?: CallOpts,
  ): Promise<ListInvestigationsResponse> {
    const status = investigationStatus(req.status);
    return this.unary(() =>
      this.investigations.listInvestigations(
        { status, pageSize: req.pageSize ?? 0, pageToken: req.pageToken ?? "" },
        this.opts(o, true),
      ),
    );
  }

  /** Every investigation (or those of `status`), most recently started first, page by page. */
  async *allInvestigations(
    req: { status?: InvestigationStatusFilter; pageSize?: number } = {},
    o?: CallOpts,
  ): AsyncGenerator<Investigation> {
    let pageToken = "";
    do {
      const page = await this.listInvestigations({ ...req, pageToken }, o);
      yield* page.investigations;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  /**
   * The investigation's audit entries with a seq above `afterSeq` (default 0: the whole trail),
   * then each new one as it is written; the stream ends once the advisory report is generated.
   * A watch cut with UNAVAILABLE (a server shutting down) is made again from the last seq
   * delivered, under the retry policy, whose attempts and waiting count afresh after each entry
   * delivered; `timeoutMs` covers the whole watch.
   */
  watchInvestigation(investigationId: string, o?: CallOpts & { afterSeq?: number }): AuditStream {
    const base = this.opts(o, false);
    return new AuditStream(
      resumingWatch(
        (afterSeq, timeoutMs) =>
          this.investigations.watchInvestigation({ investigationId, afterSeq }, { ...base, timeoutMs }),
        o?.afterSeq ?? 0,
        this.retry,
        base.timeoutMs,
        o?.signal,
      ),
      o?.signal,
    );
  }

  /**
   * The audit trail of one investigation (an id, or `{ investigationId }`), or of one message
   * exchange (`{ correlationId }`).
   */
  async getAuditTrail(
    key: string | { investigationId: string } | { correlationId: string },
    o?: CallOpts,
  ): Promise<AuditEntry[]> {
    const oneof =
      typeof key === "string"
        ? { case: "investigationId" as const, value: key }
        : "investigationId" in key
          ? { case: "investigationId" as const, value: key.investigationId }
          : { case: "correlationId" as const, value: key.correlationId };
    const res = await this.unary(() =>
      this.investigations.getAuditTrail({ key: oneof }, this.opts(o, true)),
    );
    return res.entries;
  }

  /**
   * One page of notifications, oldest first: those awaiting a reply (`status: "answered"`:
   * those answered), of one recipient or (omitted) of everyone. `pageSize` is 1..100 (omitted:
   * the server's 20); `pageToken` the previous page's nextPageToken, which is "" on the last
   * page.
   */
  async listPendingActions(
    req: {
      recipientId?: string;
      status?: PendingActionStatusFilter;
      pageSize?: number;
      pageToken?: string;
    } = {},
    o?: CallOpts,
  ): Promise<ListPendingActionsResponse> {
    const status = pendingActionStatus(req.status);
    return this.unary(() =>
      this.investigations.listPendingActions(
        {
          recipientId: req.recipientId ?? "",
          status,
          pageSize: req.pageSize ?? 0,
          pageToken: req.pageToken ?? "",
        },
        this.opts(o, true),
      ),
    );
  }

  /**
   * Every notification of the recipient (omitted: of everyone) with `status`, oldest first,
   * page by page.
   */
  async *allPendingActions(
    req: { recipientId?: string; status?: PendingActionStatusFilter; pageSize?: number } = {},
    o?: CallOpts,
  ): AsyncGenerator<PendingAction> {
    let pageToken = "";
    do {
      const page = await this.listPendingActions({ ...req, pageToken }, o);
      yield* page.actions;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  /**
   * Asks a research question and streams the run: `for await (const item of stream)` yields
   * `{type: "event"}`, `{type: "message"}`, `{type: "plan"}`, `{type: "researchResult"}`,
   * `{type: "criticDecision"}` and `{type: "expertAnswer"}` items as they are produced, then
   * `{type: "research"}`; or `await stream.result()`. An empty question, a retry limit over 20
   * or an unknown corpus is INVALID_ARGUMENT.
   */
  ask(question: string, o?: CallOpts & AskOpts): ResearchStream {
    const request = create(AskRequestSchema, {
      question,
      retryLimit: o?.retryLimit ?? 0,
      corpus: o?.corpus ?? "",
      idempotencyKey: o?.idempotencyKey ?? "",
    });
    return new ResearchStream(
      this.runCall(
        "Ask",
        request.idempotencyKey,
        o,
        (options) => this.research.ask(request, options),
        (response: AskResponse): Unpacked<ResearchItem> => {
          const p = response.payload;
          switch (p.case) {
            case "event":
              return { kind: "event", event: p.value, item: { type: "event", event: p.value } };
            case "message":
              return { kind: "derived", item: { type: "message", message: p.value } };
            case "plan":
              return { kind: "derived", item: { type: "plan", plan: p.value } };
            case "researchResult":
              return { kind: "derived", item: { type: "researchResult", researchResult: p.value } };
            case "criticDecision":
              return { kind: "derived", item: { type: "criticDecision", criticDecision: p.value } };
            case "expertAnswer":
              return { kind: "derived", item: { type: "expertAnswer", expertAnswer: p.value } };
            case "research":
              return { kind: "result", item: { type: "research", research: p.value } };
            default:
              return undefined;
          }
        },
        (event) => ({ type: "event", event }),
      ),
    );
  }

  /** The research ("RES-...") as it stands; an unknown one is NOT_FOUND. */
  async getResearch(researchId: string, o?: CallOpts): Promise<Research> {
    const res = await this.unary(() =>
      this.research.getResearch({ researchId }, this.opts(o, true)),
    );
    if (res.research === undefined) {
      throw new FrontdeskError(
        new ConnectError("GetResearch answered without a research", Code.Internal),
      );
    }
    return res.research;
  }

  /** One page of research, ordered by research id; nextPageToken is "" on the last page. */
  listResearch(
    req: { pageSize?: number; pageToken?: string } = {},
    o?: CallOpts,
  ): Promise<ListResearchResponse> {
    return this.unary(() =>
      this.research.listResearch(
        { pageSize: req.pageSize ?? 0, pageToken: req.pageToken ?? "" },
        this.opts(o, true),
      ),
    );
  }

  /** Every research, ordered by research id, fetching pages as needed. */
  async *allResearch(req: { pageSize?: number } = {}, o?: CallOpts): AsyncGenerator<Research> {
    let pageToken = "";
    do {
      const page = await this.listResearch({ ...req, pageToken }, o);
      yield* page.research;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  async listWorkflows(o?: CallOpts): Promise<Workflow[]> {
    const res = await this.unary(() => this.workflows.listWorkflows({}, this.opts(o, true)));
    return res.workflows;
  }

  /** A workflow's graph: nodes, edges and a mermaid rendering. */
  describeWorkflow(name: string, o?: CallOpts): Promise<DescribeWorkflowResponse> {
    return this.unary(() => this.workflows.describeWorkflow({ name }, this.opts(o, true)));
  }

  /**
   * Stops a running run (true). A run that is not running, unknown or already ended, is a
   * NOT_FOUND error; an id that is not a run id (a UUID) is INVALID_ARGUMENT.
   */
  async cancelRun(runId: string, o?: CallOpts): Promise<boolean> {
    const res = await this.unary(() => this.workflows.cancelRun({ runId }, this.opts(o, true)));
    return res.cancelled;
  }

  /**
   * One page of the model calls a thread made (a conversation id, a ticket thread
   * "customer_id:ticket_id", an investigation id or a research id), the most recent first, as
   * the server's LLM call log recorded them (`model.call_log` "redacted" or "full"; with it off a
   * known thread lists none). `pageSize` is at most 500 (omitted: the server's 50); a page also
   * ends early once its prompts and replies reach about 3 MiB. `pageToken` is the previous page's
   * nextPageToken, which reads on to older calls and is "" on the last page. `totalCalls` and
   * `totalUsage` cover every recorded call of the thread. A thread the server does not know is
   * NOT_FOUND.
   */
  listLlmCalls(
    req: { threadId: string; pageSize?: number; pageToken?: string },
    o?: CallOpts,
  ): Promise<ListLlmCallsResponse> {
    return this.unary(() =>
      this.workflows.listLlmCalls(
        { threadId: req.threadId, pageSize: req.pageSize ?? 0, pageToken: req.pageToken ?? "" },
        this.opts(o, true),
      ),
    );
  }

  /** Every recorded model call of the thread, the most recent first, page by page. */
  async *allLlmCalls(
    req: { threadId: string; pageSize?: number },
    o?: CallOpts,
  ): AsyncGenerator<LlmCall> {
    let pageToken = "";
    do {
      const page = await this.listLlmCalls({ ...req, pageToken }, o);
      yield* page.calls;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  /**
   * Re-attaches to a run by hand: its events numbered after `afterEventId` (default 0: from the
   * first), then its live ones, ending after the run's last event. Only RunEvents, not the
   * call's typed result: retry the original call with its idempotency key for that. A run the
   * server does not know (ended too long ago, or running on another replica) is NOT_FOUND.
   * Streams with an idempotency key re-attach on their own. Never retried.
   */
  subscribeRun(runId: string, o?: CallOpts & { afterEventId?: bigint | number }): RunEventStream {
    const request = create(SubscribeRunRequestSchema, {
      runId,
      afterEventId: BigInt(o?.afterEventId ?? 0),
    });
    return new RunEventStream(this.workflows.subscribeRun(request, this.opts(o, false)), o?.signal);
  }
}
