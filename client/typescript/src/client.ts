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
  WorkflowService,
  type DescribeWorkflowResponse,
  type Workflow,
} from "./gen/frontdesk/v1/workflow_pb.js";
import { FrontdeskError } from "./errors.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:50051";

export interface FrontdeskClientOptions {
  /** Server address as a URL: "http://host:port" (plaintext h2c) or "https://host:port". */
  baseUrl?: string;
  /** Headers sent with every call, such as an authorization header. */
  headers?: HeadersInit;
  /** Default deadline of unary calls in milliseconds (streams have none unless given). */
  timeoutMs?: number;
  /** Connect interceptors, run for every call. */
  interceptors?: Interceptor[];
}

/** Per-call options: an AbortSignal to cancel, a deadline, extra headers. */
export interface CallOpts {
  signal?: AbortSignal;
  timeoutMs?: number;
  headers?: HeadersInit;
}

/** What a SendMessage stream yields: every RunEvent in order, then one TurnResult. */
export type StreamItem =
  | { type: "event"; event: RunEvent }
  | { type: "result"; result: TurnResult };

export type BusyPolicyName = "reject" | "queue";

/**
 * What a TriageTicket stream yields: the TicketResolution first, every RunEvent in order, then
 * one TriageResult.
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
  /** The changer's clarification (required for the changer), or the manager's comment. */
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
 * One SendMessage call. `for await` over it for each RunEvent as it arrives, then the
 * TurnResult; or `await stream.result()`. Breaking out of the loop, or aborting the
 * signal given to sendMessage, cancels the call. Errors are thrown as FrontdeskError.
 */
export class TurnStream implements AsyncIterable<StreamItem> {
  /** Events received so far. */
  readonly events: RunEvent[] = [];
  private turnResult: TurnResult | undefined;
  private started = false;

  constructor(private readonly responses: AsyncIterable<SendMessageResponse>) {}

  async *[Symbol.asyncIterator](): AsyncIterator<StreamItem> {
    if (this.started) throw new Error("a TurnStream can be iterated only once");
    this.started = true;
    try {
      for await (const response of this.responses) {
        const payload = response.payload;
        if (payload.case === "event") {
          this.events.push(payload.value);
          yield { type: "event", event: payload.value };
        } else if (payload.case === "result") {
          this.turnResult = payload.value;
          yield { type: "result", result: payload.value };
        }
        // a payload kind newer than this client is skipped
      }
    } catch (e) {
      throw FrontdeskError.from(e);
    }
  }

  /** Consumes the rest of the stream and returns the turn's result. */
  async result(): Promise<TurnResult> {
    if (!this.started) {
      for await (const _ of this) {
        // drain
      }
    }
    if (this.turnResult === undefined) {
      throw new Error("SendMessage stream ended without a TurnResult");
    }
    return this.turnResult;
  }
}

/**
 * One TriageTicket call. `for await` over it for the TicketResolution (which ticket the message
 * belongs to), each RunEvent as it arrives, then the TriageResult; or `await stream.result()`.
 * Breaking out of the loop, or aborting the signal given to triageTicket, cancels the call.
 * Errors are thrown as FrontdeskError.
 */
export class TriageStream implements AsyncIterable<TriageItem> {
  /** Events received so far. */
  readonly events: RunEvent[] = [];
  /** The ticket resolution, once it has arrived (it comes first). */
  resolution: TicketResolution | undefined;
  private triageResult: TriageResult | undefined;
  private started = false;

  constructor(private readonly responses: AsyncIterable<TriageTicketResponse>) {}

  async *[Symbol.asyncIterator](): AsyncIterator<TriageItem> {
    if (this.started) throw new Error("a TriageStream can be iterated only once");
    this.started = true;
    try {
      for await (const response of this.responses) {
        const payload = response.payload;
        if (payload.case === "resolution") {
          this.resolution = payload.value;
          yield { type: "resolution", resolution: payload.value };
        } else if (payload.case === "event") {
          this.events.push(payload.value);
          yield { type: "event", event: payload.value };
        } else if (payload.case === "result") {
          this.triageResult = payload.value;
          yield { type: "result", result: payload.value };
        }
        // a payload kind newer than this client is skipped
      }
    } catch (e) {
      throw FrontdeskError.from(e);
    }
  }

  /** Consumes the rest of the stream and returns the triage result. */
  async result(): Promise<TriageResult> {
    if (!this.started) {
      for await (const _ of this) {
        // drain
      }
    }
    if (this.triageResult === undefined) {
      throw new Error("TriageTicket stream ended without a TriageResult");
    }
    return this.triageResult;
  }
}

/**
 * One StartInvestigation or Respond call. `for await` over it for each RunEvent, AgentMessage
 * and StatusChange as the run produces them, then the Investigation as the run left it
 * (finished, or awaiting a reply); or `await stream.result()`. Breaking out of the loop, or
 * aborting the signal given to the call, cancels it. Errors are thrown as FrontdeskError.
 */
export class InvestigationStream implements AsyncIterable<InvestigationItem> {
  /** Events received so far. */
  readonly events: RunEvent[] = [];
  /** Agent messages received so far. */
  readonly messages: AgentMessage[] = [];
  /** Status changes received so far. */
  readonly statusChanges: StatusChange[] = [];
  private investigation: Investigation | undefined;
  private started = false;

  constructor(private readonly responses: AsyncIterable<{ progress?: InvestigationProgress }>) {}

  async *[Symbol.asyncIterator](): AsyncIterator<InvestigationItem> {
    if (this.started) throw new Error("an InvestigationStream can be iterated only once");
    this.started = true;
    try {
      for await (const response of this.responses) {
        const payload = response.progress?.payload;
        if (payload === undefined) continue;
        if (payload.case === "event") {
          this.events.push(payload.value);
          yield { type: "event", event: payload.value };
        } else if (payload.case === "message") {
          this.messages.push(payload.value);
          yield { type: "message", message: payload.value };
        } else if (payload.case === "statusChange") {
          this.statusChanges.push(payload.value);
          yield { type: "statusChange", statusChange: payload.value };
        } else if (payload.case === "investigation") {
          this.investigation = payload.value;
          yield { type: "investigation", investigation: payload.value };
        }
        // a payload kind newer than this client is skipped
      }
    } catch (e) {
      throw FrontdeskError.from(e);
    }
  }

  /** Consumes the rest of the stream and returns the investigation. */
  async result(): Promise<Investigation> {
    if (!this.started) {
      for await (const _ of this) {
        // drain
      }
    }
    if (this.investigation === undefined) {
      throw new Error("investigation stream ended without an Investigation");
    }
    return this.investigation;
  }
}

/**
 * One Ask call. `for await` over it for each RunEvent, OrchestratorMessage, Plan,
 * ResearchResult, CriticVerdict and ExpertAnswer as the run produces them, then the Research
 * (its outcome, final answer and reasoning trace); or `await stream.result()`. Breaking out of
 * the loop, or aborting the signal given to ask, cancels the call. Errors are thrown as
 * FrontdeskError.
 */
export class ResearchStream implements AsyncIterable<ResearchItem> {
  /** Events received so far. */
  readonly events: RunEvent[] = [];
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
  private started = false;

  constructor(private readonly responses: AsyncIterable<AskResponse>) {}

  async *[Symbol.asyncIterator](): AsyncIterator<ResearchItem> {
    if (this.started) throw new Error("a ResearchStream can be iterated only once");
    this.started = true;
    try {
      for await (const response of this.responses) {
        const payload = response.payload;
        switch (payload.case) {
          case "event":
            this.events.push(payload.value);
            yield { type: "event", event: payload.value };
            break;
          case "message":
            this.messages.push(payload.value);
            yield { type: "message", message: payload.value };
            break;
          case "plan":
            this.plans.push(payload.value);
            yield { type: "plan", plan: payload.value };
            break;
          case "researchResult":
            this.results.push(payload.value);
            yield { type: "researchResult", researchResult: payload.value };
            break;
          case "criticDecision":
            this.criticDecisions.push(payload.value);
            yield { type: "criticDecision", criticDecision: payload.value };
            break;
          case "expertAnswer":
            this.expertAnswers.push(payload.value);
            yield { type: "expertAnswer", expertAnswer: payload.value };
            break;
          case "research":
            this.research = payload.value;
            yield { type: "research", research: payload.value };
            break;
          default:
          // a payload kind newer than this client (or none) is skipped
        }
      }
    } catch (e) {
      throw FrontdeskError.from(e);
    }
  }

  /** Consumes the rest of the stream and returns the research. */
  async result(): Promise<Research> {
    if (!this.started) {
      for await (const _ of this) {
        // drain
      }
    }
    if (this.research === undefined) {
      throw new Error("Ask stream ended without a Research");
    }
    return this.research;
  }
}

/**
 * One WatchInvestigation call: `for await` yields each AuditEntry, the trail written so far
 * first, then each new one as it is written; it ends once the advisory report is generated.
 * Breaking out of the loop, or aborting the signal, cancels the call.
 */
export class AuditStream implements AsyncIterable<AuditEntry> {
  /** Entries received so far. */
  readonly entries: AuditEntry[] = [];
  private started = false;

  constructor(private readonly responses: AsyncIterable<WatchInvestigationResponse>) {}

  async *[Symbol.asyncIterator](): AsyncIterator<AuditEntry> {
    if (this.started) throw new Error("an AuditStream can be iterated only once");
    this.started = true;
    try {
      for await (const response of this.responses) {
        if (response.entry === undefined) continue;
        this.entries.push(response.entry);
        yield response.entry;
      }
    } catch (e) {
      throw FrontdeskError.from(e);
    }
  }

  /** Consumes the rest of the stream (until the report) and returns every entry received. */
  async all(): Promise<AuditEntry[]> {
    if (!this.started) {
      for await (const _ of this) {
        // drain
      }
    }
    return this.entries;
  }
}

/**
 * Client for Frontdesk's ConversationService, TriageService, InvestigationService,
 * ResearchService and WorkflowService over gRPC (HTTP/2), built on Connect-ES. The generated
 * Connect clients are `conversations`, `triage`, `investigations`, `research` and `workflows`.
 * Call close() when done, to release the HTTP/2 connection.
 */
export class FrontdeskClient {
  readonly conversations: Client<typeof ConversationService>;
  readonly workflows: Client<typeof WorkflowService>;
  readonly triage: Client<typeof TriageService>;
  readonly investigations: Client<typeof InvestigationService>;
  readonly research: Client<typeof ResearchService>;
  private readonly sessions: Http2SessionManager;
  private readonly headers: HeadersInit | undefined;
  private readonly timeoutMs: number | undefined;

  constructor(options: FrontdeskClientOptions = {}) {
    const baseUrl = options.baseUrl ?? DEFAULT_BASE_URL;
    this.sessions = new Http2SessionManager(baseUrl);
    const transport = createGrpcTransport({
      baseUrl,
      sessionManager: this.sessions,
      interceptors: options.interceptors ?? [],
    });
    this.conversations = createClient(ConversationService, transport);
    this.workflows = createClient(WorkflowService, transport);
    this.triage = createClient(TriageService, transport);
    this.investigations = createClient(InvestigationService, transport);
    this.research = createClient(ResearchService, transport);
    this.headers = options.headers;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  /** Closes the HTTP/2 connection; calls in flight fail. */
  close(): void {
    this.sessions.abort();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  private opts(o: CallOpts | undefined, unary: boolean): CallOptions {
    const headers = new Headers(this.headers);
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

  /** Creates a conversation; resolves to { conversation, welcome }. */
  startConversation(
    req: { workflow?: string; conversationId?: string; idempotencyKey?: string } = {},
    o?: CallOpts,
  ): Promise<StartConversationResponse> {
    return this.unary(() =>
      this.conversations.startConversation(
        {
          workflow: req.workflow ?? "intake",
          conversationId: req.conversationId ?? "",
          idempotencyKey: req.idempotencyKey ?? "",
        },
        this.opts(o, true),
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
    return new TurnStream(this.conversations.sendMessage(request, this.opts(o, false)));
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
    const res = await this.unary(() =>
      this.conversations.resetConversation(
        { conversationId, idempotencyKey: o?.idempotencyKey ?? "" },
        this.opts(o, true),
      ),
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
    return new TriageStream(this.triage.triageTicket(request, this.opts(o, false)));
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
      this.investigations.startInvestigation(request, this.opts(o, false)),
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
    return new InvestigationStream(this.investigations.respond(request, this.opts(o, false)));
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
   */
  watchInvestigation(investigationId: string, o?: CallOpts & { afterSeq?: number }): AuditStream {
    return new AuditStream(
      this.investigations.watchInvestigation(
        { investigationId, afterSeq: o?.afterSeq ?? 0 },
        this.opts(o, false),
      ),
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
   * The notifications awaiting a reply (`status: "answered"`: those answered), of one
   * recipient or (omitted) of everyone.
   */
  async listPendingActions(
    req: { recipientId?: string; status?: PendingActionStatusFilter } = {},
    o?: CallOpts,
  ): Promise<PendingAction[]> {
    const status = pendingActionStatus(req.status);
    const res = await this.unary(() =>
      this.investigations.listPendingActions(
        { recipientId: req.recipientId ?? "", status },
        this.opts(o, true),
      ),
    );
    return res.actions;
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
    return new ResearchStream(this.research.ask(request, this.opts(o, false)));
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
}
