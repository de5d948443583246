export {
  AuditStream,
  CONVERSATION_ENDED,
  DEFAULT_BASE_URL,
  FrontdeskClient,
  InvestigationStream,
  QUOTA_EXCEEDED,
  ResearchStream,
  RunEventStream,
  SCOPE_MISSING,
  TriageStream,
  TurnStream,
  UNAUTHENTICATED,
  eventKind,
  intakeState,
  serviceCallContext,
  serviceCallState,
  type AskOpts,
  type BusyPolicyName,
  type CallOpts,
  type FrontdeskClientOptions,
  type HrMutationInput,
  type InvestigationItem,
  type InvestigationStatusFilter,
  type ManagerDecisionName,
  type PendingActionStatusFilter,
  type RespondInput,
  type ResearchItem,
  type ResponderRoleName,
  type StreamItem,
  type TicketStatusFilter,
  type TlsOptions,
  type TriageItem,
} from "./client.js";
export { FrontdeskError, grpcCodeName, type FieldViolation } from "./errors.js";
export {
  DEFAULT_RETRY_POLICY,
  RETRYABLE_CODES,
  isRetryable,
  type RetryPolicy,
  type StreamProgress,
} from "./retry.js";
export { Code } from "@connectrpc/connect";
// The generated messages and service descriptors (also importable as
// "@frontdesk/client/gen/frontdesk/v1/<file>_pb").
export * from "./gen/frontdesk/v1/common_pb.js";
export * from "./gen/frontdesk/v1/conversation_pb.js";
export * from "./gen/frontdesk/v1/investigation_pb.js";
export * from "./gen/frontdesk/v1/research_pb.js";
export * from "./gen/frontdesk/v1/triage_pb.js";
export * from "./gen/frontdesk/v1/workflow_pb.js";
