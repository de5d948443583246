import { Code, ConnectError } from "@connectrpc/connect";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/** One google.rpc.BadRequest field violation: which request field, and why. */
export interface FieldViolation {
  field: string;
  description: string;
}

/**
 * A failed Frontdesk call: the gRPC status plus its google.rpc details, decoded from the
 * `grpc-status-details-bin` trailer.
 */
export class FrontdeskError extends Error {
  override name = "FrontdeskError";
  /** The status code (Connect's Code enum has gRPC's numeric values). */
  readonly code: Code;
  /** The code as gRPC spells it, such as "NOT_FOUND" or "INVALID_ARGUMENT". */
  readonly codeName: string;
  /** The status message, without a code prefix. */
  readonly rawMessage: string;
  /**
   * Stable google.rpc.ErrorInfo reason, such as "NOT_FOUND", "THREAD_BUSY", "WRONG_RESPONDER",
   * "CONVERSATION_ENDED" (a message to a service call that was hung up; `CONVERSATION_ENDED`), or
   * the API key refusals "UNAUTHENTICATED", "SCOPE_MISSING" and "QUOTA_EXCEEDED": an
   * `ErrorReason` name without its `ERROR_REASON_` prefix.
   */
  readonly reason: string | undefined;
  /** The ErrorInfo domain ("frontdesk.dev"). */
  readonly domain: string | undefined;
  /** The ErrorInfo metadata, such as the `scope` a key lacks or the `quota` a tenant is over. */
  readonly errorMetadata: Readonly<Record<string, string>>;
  /** google.rpc.BadRequest field violations (INVALID_ARGUMENT). */
  readonly fieldViolations: readonly FieldViolation[];
  /**
   * The google.rpc.RetryInfo delay in milliseconds: how long to wait before retrying, sent where
   * retrying helps (such as ABORTED THREAD_BUSY, with the time left on another replica's lease,
   * UNAVAILABLE MODEL_UNAVAILABLE, or RESOURCE_EXHAUSTED QUOTA_EXCEEDED); undefined when the
   * server sent none.
   */
  readonly retryDelayMs: number | undefined;

  constructor(cause: ConnectError) {
    const codeName = grpcCodeName(cause.code);
    let reason: string | undefined;
    let domain: string | undefined;
    let errorMetadata: Record<string, string> = {};
    const fieldViolations: FieldViolation[] = [];
    let retryDelayMs: number | undefined;
    for (const detail of cause.details) {
      if (!("type" in detail)) continue;
      try {
        if (detail.type === "google.rpc.ErrorInfo") {
          const info = decodeErrorInfo(detail.value);
          reason = info.reason || undefined;
          domain = info.domain || undefined;
          errorMetadata = info.metadata;
        } else if (detail.type === "google.rpc.BadRequest") {
          fieldViolations.push(...decodeBadRequest(detail.value));
        } else if (detail.type === "google.rpc.RetryInfo") {
          retryDelayMs = decodeRetryInfo(detail.value);
        }
      } catch {
        // a malformed detail must not hide the error itself
      }
    }
    let text = `${codeName}: ${cause.rawMessage}`;
    if (reason) text += ` (reason ${reason})`;
    if (retryDelayMs !== undefined) text += ` (retry after ${retryDelayMs}ms)`;
    for (const v of fieldViolations) text += `; ${v.field}: ${v.description}`;
    super(text, { cause });
    this.code = cause.code;
    this.codeName = codeName;
    this.rawMessage = cause.rawMessage;
    this.reason = reason;
    this.domain = domain;
    this.errorMetadata = errorMetadata;
    this.fieldViolations = fieldViolations;
    this.retryDelayMs = retryDelayMs;
  }

  /**
   * True for UNAVAILABLE and ABORTED: the codes a call with an idempotency key is retried on
   * (`RETRYABLE_CODES`).
   */
  get retryable(): boolean {
    return this.code === Code.Unavailable || this.code === Code.Aborted;
  }

  /**
   * A FrontdeskError made on the client side: with a google.rpc.ErrorInfo of `reason` (domain
   * "frontdesk.dev") when one is given, as the server would send it, else with no details.
   */
  static of(code: Code, message: string, reason?: string): FrontdeskError {
    const cause = new ConnectError(message, code);
    if (reason) cause.details = [{ type: "google.rpc.ErrorInfo", value: encodeErrorInfo(reason, "frontdesk.dev") }];
    return new FrontdeskError(cause);
  }

  /** Wraps any thrown value: ConnectErrors (and aborts) become FrontdeskErrors. */
  static from(reason: unknown): FrontdeskError {
    if (reason instanceof FrontdeskError) return reason;
    return new FrontdeskError(ConnectError.from(reason));
  }
}

/** "NOT_FOUND" for Code.NotFound, and so on (the gRPC spelling). */
export function grpcCodeName(code: Code): string {
  const name = Code[code] ?? `CODE_${code}`;
  if (code === Code.Canceled) return "CANCELLED";
  return name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

// google.rpc.ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
function decodeErrorInfo(bytes: Uint8Array): {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
} {
  const out = { reason: "", domain: "", metadata: {} as Record<string, string> };
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.LengthDelimited) out.reason = r.string();
    else if (no === 2 && wt === WireType.LengthDelimited) out.domain = r.string();
    else if (no === 3 && wt === WireType.LengthDelimited) {
      const [k, v] = decodeStringPair(r.bytes());
      out.metadata[k] = v;
    } else r.skip(wt, no);
  }
  return out;
}

function encodeErrorInfo(reason: string, domain: string): Uint8Array {
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).string(reason);
  w.tag(2, WireType.LengthDelimited).string(domain);
  return w.finish();
}

// google.rpc.RetryInfo { google.protobuf.Duration retry_delay = 1; }
// google.protobuf.Duration { int64 seconds = 1; int32 nanos = 2; }
function decodeRetryInfo(bytes: Uint8Array): number {
  let ms = 0;
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.LengthDelimited) {
      const d = new BinaryReader(r.bytes());
      let seconds = 0;
      let nanos = 0;
      while (d.pos < d.len) {
        const [dno, dwt] = d.tag();
        if (dno === 1 && dwt === WireType.Varint) seconds = Number(d.int64());
        else if (dno === 2 && dwt === WireType.Varint) nanos = d.int32();
        else d.skip(dwt, dno);
      }
      ms = seconds * 1000 + nanos / 1e6;
    } else r.skip(wt, no);
  }
  return Math.max(0, ms);
}

// google.rpc.BadRequest { repeated FieldViolation field_violations = 1; }
// FieldViolation { string field = 1; string description = 2; ... }
function decodeBadRequest(bytes: Uint8Array): FieldViolation[] {
  const out: FieldViolation[] = [];
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.LengthDelimited) {
      const [field, description] = decodeStringPair(r.bytes());
      out.push({ field, description });
    } else r.skip(wt, no);
  }
  return out;
}

/** Fields 1 and 2 of a message, both strings (a map entry, or a FieldViolation's first two). */
function decodeStringPair(bytes: Uint8Array): [string, string] {
  let a = "";
  let b = "";
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.LengthDelimited) a = r.string();
    else if (no === 2 && wt === WireType.LengthDelimited) b = r.string();
    else r.skip(wt, no);
  }
  return [a, b];
}
