-- The structured LLM call log: one row per model call a workflow made, written by the server's
-- SQL call log (model.call_log other than "off") and read per thread by
-- WorkflowService/ListLlmCalls. Keep in step with migrations/postgres (0007_llm_calls.sql).
--
-- `id` is minted by the writer (a UUIDv7, so ids sort by time); `thread_id` is a conversation
-- id, a ticket thread, an investigation id or a research id. `prompt_json` and `response_json`
-- hold the prompt messages and the reply in full or redacted to role and character counts, as
-- configured; `response_json` is 'null' and `error` set for a failed call. No foreign keys:
-- the log outlives erased threads.
CREATE TABLE llm_calls (
    id                TEXT    NOT NULL PRIMARY KEY,
    thread_id         TEXT    NOT NULL,
    run_id            TEXT    NOT NULL,
    node              TEXT    NOT NULL,
    purpose           TEXT    NOT NULL,
    model             TEXT    NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd          REAL    NOT NULL,
    latency_ms        INTEGER NOT NULL,
    attempts          INTEGER NOT NULL,
    error             TEXT,
    prompt_json       TEXT    NOT NULL,
    response_json     TEXT    NOT NULL,
    at_ms             INTEGER NOT NULL
);
-- A thread's calls in time order.
CREATE INDEX llm_calls_thread ON llm_calls (thread_id, at_ms);
