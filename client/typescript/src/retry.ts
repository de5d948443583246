import { Code } from "@connectrpc/connect";

import type { RunEvent } from "./gen/frontdesk/v1/common_pb.js";
import type { SubscribeRunResponse } from "./gen/frontdesk/v1/workflow_pb.js";
import { FrontdeskError } from "./errors.js";

/**
 * How a FrontdeskClient retries calls that carry an idempotency key, and re-attaches their
 * broken streams; a watchInvestigation cut with UNAVAILABLE is watched again under it too. Every
 * field is optional; `new FrontdeskClient({ retry: false })` turns all that off.
 */
export interface RetryPolicy {
  /**
   * The most times one call is made, the first included (a stream also re-attaches at most this
   * many times; a watch is made at most this many times in a row without an entry between).
   * Default 5.
   */
  maxAttempts?: number;
  /**
   * The most milliseconds one call spends waiting between attempts, all waits together (for a
   * watch, those since its last entry). Default 30000.
   */
  maxWaitMs?: number;
  /**
   * The wait when the server's error carries no RetryInfo delay: `initialBackoffMs` doubling
   * with each attempt up to `maxBackoffMs`, each wait a random 50-100% of that (jitter).
   * Defaults 250 and 5000.
   */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /**
   * Re-attach a broken stream with WorkflowService/SubscribeRun (true, the default), or re-issue
   * the call after the wait for its error, as any retry (false).
   */
  reattach?: boolean;
}

/** The policy `retry: true` (or no `retry` option) means. */
export const DEFAULT_RETRY_POLICY: Readonly<Required<RetryPolicy>> = Object.freeze({
  maxAttempts: 5,
  maxWaitMs: 30_000,
  initialBackoffMs: 250,
  maxBackoffMs: 5_000,
  reattach: true,
});

/**
 * The status codes a call with an idempotency key is retried on: UNAVAILABLE (the server, the
 * model, the store or a dependency is unavailable; the connection broke) and ABORTED
 * (THREAD_BUSY, CHECKPOINT_CONFLICT). Every other code is final.
 */
export const RETRYABLE_CODES: readonly Code[] = Object.freeze([Code.Unavailable, Code.Aborted]);

/** A policy with every field filled in; undefined for `retry: false`. */
export function resolveRetryPolicy(
  retry: RetryPolicy | boolean | undefined,
): Required<RetryPolicy> | undefined {
  if (retry === false) return undefined;
  if (retry === undefined || retry === true) return { ...DEFAULT_RETRY_POLICY };
  const p = { ...DEFAULT_RETRY_POLICY, ...stripUndefined(retry) };
  if (!(p.maxAttempts >= 1)) throw new RangeError("retry.maxAttempts must be at least 1");
  if (p.maxWaitMs < 0 || p.initialBackoffMs < 0 || p.maxBackoffMs < 0) {
    throw new RangeError("retry.maxWaitMs, initialBackoffMs and maxBackoffMs must not be negative");
  }
  return p;
}

function stripUndefined(p: RetryPolicy): RetryPolicy {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(p)) if (v !== undefined) out[k] = v;
  return out as RetryPolicy;
}

/** Whether the client retries an error of this code (for a call with an idempotency key). */
export function isRetryable(code: Code): boolean {
  return RETRYABLE_CODES.includes(code);
}

/** One call's attempts and waits so far, against its policy and its deadline (Date.now() ms). */
export class Budget {
  calls = 1;
  reattaches = 0;
  waitedMs = 0;

  constructor(
    readonly policy: Required<RetryPolicy> | undefined,
    readonly deadline: number | undefined,
  ) {}

  /** The wait before calling again after `err`; undefined when `err` is final. */
  delay(err: FrontdeskError): number | undefined {
    const p = this.policy;
    if (p === undefined || !isRetryable(err.code)) return undefined;
    if (this.calls >= p.maxAttempts) return undefined;
    const wait = err.retryDelayMs ?? backoff(p, this.calls);
    if (this.waitedMs + wait > p.maxWaitMs) return undefined;
    if (this.deadline !== undefined && Date.now() + wait >= this.deadline) return undefined;
    return wait;
  }

  canReattach(): boolean {
    const p = this.policy;
    return p !== undefined && p.reattach && this.reattaches < p.maxAttempts;
  }

  /** What is left of the deadline for the next attempt (undefined: no deadline). */
  timeoutMs(): number | undefined {
    return this.deadline === undefined ? undefined : Math.max(1, this.deadline - Date.now());
  }
}

function backoff(p: Required<RetryPolicy>, retry: number): number {
  const ceiling = Math.min(p.maxBackoffMs, p.initialBackoffMs * 2 ** Math.max(0, retry - 1));
  return ceiling * (0.5 + Math.random() / 2);
}

/** Waits `ms`, or less when `signal` aborts (then throws CANCELLED). */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(FrontdeskError.of(Code.Canceled, "cancelled by the caller"));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(FrontdeskError.of(Code.Canceled, "cancelled by the caller"));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * One WatchInvestigation across its calls: yields the responses of `open(afterSeq, timeoutMs)`
 * and, when a call fails with UNAVAILABLE (any reason: a server shutting down,
 * SHUTTING_DOWN, or a broken connection), opens it again from the last seq delivered, after the
 * RetryInfo delay or the backoff, within the policy's attempts and waiting in a row (counted
 * afresh after each entry delivered) and the watch's deadline. A watch only reads the trail and
 * asks again after the last seq delivered, so it resumes without an idempotency key. Every other
 * error, and UNAVAILABLE with no policy or the bounds used up, is thrown; a call that ends
 * normally ends the watch.
 */
export async function* resumingWatch<R extends { entry?: { seq: number } }>(
  open: (afterSeq: number, timeoutMs: number | undefined) => AsyncIterable<R>,
  afterSeq: number,
  policy: Required<RetryPolicy> | undefined,
  timeoutMs: number | undefined,
  signal: AbortSignal | undefined,
): AsyncGenerator<R> {
  let budget = new Budget(policy, timeoutMs === undefined ? undefined : Date.now() + timeoutMs);
  let last = afterSeq;
  for (;;) {
    try {
      for await (const response of open(last, budget.timeoutMs())) {
        const seq = response.entry?.seq;
        if (seq !== undefined) {
          // A server may send an entry at or below the seq asked for; the caller must not see it twice.
          if (seq <= last) continue;
          last = seq;
          // A watch lives as long as its investigation (days, waiting on a manager's reply): a
          // budget over the whole watch would be used up by a few ordinary server restarts, so
          // only failures in a row count. The deadline still covers the whole watch.
          budget = new Budget(policy, budget.deadline);
        }
        yield response;
      }
      return;
    } catch (e) {
      const err = FrontdeskError.from(e);
      // ABORTED, retried for keyed calls, is no reason to watch again.
      if (err.code !== Code.Unavailable || signal?.aborted) throw err;
      const wait = budget.delay(err);
      if (wait === undefined) throw err;
      budget.calls += 1;
      budget.waitedMs += wait;
      await sleep(wait, signal);
    }
  }
}

/** What a response of a streamed call carries, as the re-attaching machinery sees it. */
export type Unpacked<I> =
  | { kind: "event"; event: RunEvent; item: I }
  | { kind: "result"; item: I }
  | { kind: "resolution"; item: I }
  | { kind: "derived"; item: I }
  | undefined;

/** Counters of one streamed call: what it took to deliver it. */
export interface StreamProgress {
  /** How many times the call was made (1 unless retried or its result fetched again). */
  readonly attempts: number;
  /** How many times the stream re-attached to its run with SubscribeRun. */
  readonly reattaches: number;
  /** Events the server no longer held when the stream re-attached (SubscribeRunResponse.skipped). */
  readonly skippedEvents: number;
}

/** How one streamed call is made and re-attached. */
export interface RunCall<R, I> {
  what: string;
  /** The call itself, with what is left of its deadline. */
  open(timeoutMs: number | undefined): AsyncIterable<R>;
  /** SubscribeRun, with what is left of the deadline. */
  subscribe(runId: string, afterEventId: bigint, timeoutMs: number | undefined): AsyncIterable<SubscribeRunResponse>;
  unpack(response: R): Unpacked<I>;
  /** The item of an event that arrived through SubscribeRun. */
  eventItem(event: RunEvent): I;
  /** undefined: not retried (retries off, or no idempotency key). */
  policy: Required<RetryPolicy> | undefined;
  timeoutMs: number | undefined;
  signal: AbortSignal | undefined;
}

const TERMINAL = new Set(["runFinished", "runFailed", "runInterrupted"]);

type Plan =
  | { action: "call"; delayMs: number }
  | { action: "subscribe"; runId: string; afterEventId: bigint }
  | { action: "raise"; error: FrontdeskError };

/**
 * Runs one streamed call: yields its items, and with a policy retries it and re-attaches a
 * broken stream (SubscribeRun, then the call again with its idempotency key for the result),
 * delivering each event once. Events are told apart by (run id, event id) and the event's
 * time: event ids number one execution of a run, so an id seen again with another time belongs
 * to a later execution (resumed after a crash, or by another replica).
 */
export async function* resumable<R, I>(
  call: RunCall<R, I>,
  progress: { attempts: number; reattaches: number; skippedEvents: number },
): AsyncGenerator<I> {
  const budget = new Budget(call.policy, call.timeoutMs === undefined ? undefined : Date.now() + call.timeoutMs);
  const seen = new Map<string, string>();
  const ended = new Map<string, RunEvent>();
  let lastDup = false;
  let resolutionSeen = false;
  let runId = "";
  let eventId = 0n;
  let mode: "call" | "subscribe" = "call";
  let haveResult = false;
  // The failure that took the stream from the call to SubscribeRun (the call's error, or its
  // ending without its result): what a fallback to the call waits on, or throws.
  let cause: FrontdeskError | undefined;

  const sync = (): void => {
    progress.attempts = budget.calls;
    progress.reattaches = budget.reattaches;
  };
  const fresh = (ev: RunEvent): boolean => {
    const key = `${ev.runId}\u0000${ev.eventId}`;
    const stamp = `${ev.time?.seconds ?? 0n}.${ev.time?.nanos ?? 0}`;
    const prior = seen.get(key);
    if (prior !== undefined && prior === stamp) {
      lastDup = true;
      return false;
    }
    if (prior !== undefined) {
      // A new execution of the run: its events count again from 1.
      const prefix = `${ev.runId}\u0000`;
      for (const k of [...seen.keys()]) if (k.startsWith(prefix)) seen.delete(k);
      ended.delete(ev.runId);
    }
    seen.set(key, stamp);
    lastDup = false;
    runId = ev.runId;
    eventId = ev.eventId;
    if (ev.kind.case !== undefined && TERMINAL.has(ev.kind.case)) ended.set(ev.runId, ev);
    return true;
  };
  const openRun = (): string => (runId !== "" && !ended.has(runId) ? runId : "");
  const again = (wait: number | undefined): Plan => {
    mode = "call";
    budget.calls += 1;
    budget.waitedMs += wait ?? 0;
    return { action: "call", delayMs: wait ?? 0 };
  };
  /** SubscribeRun at once, because of `why`. */
  const reattach = (why: FrontdeskError | undefined): Plan => {
    mode = "subscribe";
    budget.reattaches += 1;
    cause = why;
    return { action: "subscribe", runId, afterEventId: eventId };
  };
  /** The call again after the wait `err` asks for (its RetryInfo, else the backoff), counted against maxAttempts; or throw `err` when it is final. */
  const retry = (err: FrontdeskError): Plan => {
    const wait = budget.delay(err);
    return wait === undefined ? { action: "raise", error: err } : again(wait);
  };
  /**
   * The call again when SubscribeRun could not follow the run (`subErr`: NOT_FOUND, another
   * replica has it or this one forgot it; UNAVAILABLE, it is down; undefined: it ended before the
   * run's last event, with no re-attach left); with its key the call attaches or replays. It
   * waits what the failure that left the call asks for (its RetryInfo, else the backoff), or
   * `subErr`'s RetryInfo when that is longer, and counts against maxAttempts; else that failure
   * is thrown.
   */
  const fallBack = (subErr: FrontdeskError | undefined): Plan => {
    const why = cause as FrontdeskError;
    let asked = why;
    // the call's stream ended without its result: broken, like UNAVAILABLE
    if (!isRetryable(asked.code)) asked = FrontdeskError.of(Code.Unavailable, why.rawMessage);
    if (
      subErr !== undefined &&
      isRetryable(subErr.code) &&
      subErr.retryDelayMs !== undefined &&
      (asked.retryDelayMs === undefined || subErr.retryDelayMs > asked.retryDelayMs)
    ) {
      asked = subErr;
    }
    const wait = budget.delay(asked);
    return wait === undefined ? { action: "raise", error: why } : again(wait);
  };
  const failed = (err: FrontdeskError): Plan => {
    if (mode === "subscribe") return fallBack(err);
    if (budget.policy === undefined) return { action: "raise", error: err };
    if (isRetryable(err.code) && openRun() !== "" && budget.canReattach()) return reattach(err);
    return retry(err);
  };
  const endedWithout = (): Plan => {
    if (mode === "subscribe") {
      // ended before the run's last event: re-attach again, or fall back to the call
      if (openRun() !== "") return budget.canReattach() ? reattach(cause) : fallBack(undefined);
      const last = ended.get(runId);
      if (last?.kind.case === "runFailed") {
        const failed = last.kind.value;
        return retry(FrontdeskError.of(failed.code as Code, failed.message, failed.reason));
      }
      // The run ended: the call with its key replays the recorded outcome, at once (nothing
      // failed), as one of the maxAttempts calls.
      if (budget.policy !== undefined && budget.calls >= budget.policy.maxAttempts) {
        return { action: "raise", error: cause as FrontdeskError };
      }
      return again(0);
    }
    const err = FrontdeskError.of(Code.Internal, `${call.what} stream ended without its result`);
    if (budget.policy === undefined) return { action: "raise", error: err };
    if (openRun() !== "" && budget.canReattach()) return reattach(err);
    const wait = budget.delay(FrontdeskError.of(Code.Unavailable, err.rawMessage));
    return wait === undefined ? { action: "raise", error: err } : again(wait);
  };

  let plan: Plan = { action: "call", delayMs: 0 };
  for (;;) {
    if (plan.action === "raise") throw plan.error;
    if (plan.action === "call" && plan.delayMs > 0) await sleep(plan.delayMs, call.signal);
    sync();
    try {
      if (plan.action === "subscribe") {
        for await (const response of call.subscribe(plan.runId, plan.afterEventId, budget.timeoutMs())) {
          progress.skippedEvents += Number(response.skipped);
          if (response.event !== undefined && fresh(response.event)) yield call.eventItem(response.event);
        }
      } else {
        for await (const response of call.open(budget.timeoutMs())) {
          const u = call.unpack(response);
          if (u === undefined) continue;
          switch (u.kind) {
            case "event":
              if (fresh(u.event)) yield u.item;
              break;
            case "result":
              haveResult = true;
              yield u.item;
              break;
            case "resolution":
              if (!resolutionSeen) {
                resolutionSeen = true;
                yield u.item;
              }
              break;
            case "derived":
              if (!lastDup) yield u.item;
              break;
          }
        }
      }
    } catch (e) {
      if (haveResult) return; // the stream broke after its result: nothing is missing
      const err = FrontdeskError.from(e);
      if (call.signal?.aborted || err.code === Code.Canceled) throw err;
      plan = failed(err);
      continue;
    }
    if (haveResult) return;
    plan = endedWithout();
  }
}
