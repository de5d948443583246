-- The structured LLM call log: one row per model call a workflow made, written by the server's
-- SQL call log (model.call_log other than "off") and read per thread by
-- WorkflowService/ListLlmCalls. Keep in step with migrations/sqlite (0006_llm_calls.sql).
--
-- `id` is minted by the writer (a UUIDv7, so ids sort by time); `thread_id` is a conversation
-- id, a ticket thread, an investigation id or a research id. `prompt_json` and `response_json`
-- hold the prompt messages and the reply in full or redacted to role and character counts, as
-- configured; `response_json` is 'null' and `error` set for a failed call. No foreign keys:
-- the log outlives erased threads. Ids use the "C" collation so they sort by bytes, as in SQLite.
CREATE TABLE llm_calls (
    id                TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    thread_id         TEXT COLLATE "C" NOT NULL,
    run_id            TEXT COLLATE "C" NOT NULL,
    node              TEXT   NOT NULL,
    purpose           TEXT   NOT NULL,
    model             TEXT   NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    cost_usd          DOUBLE PRECISION NOT NULL,
    latency_ms        BIGINT NOT NULL,
    attempts          BIGINT NOT NULL,
    error             TEXT,
    prompt_json       TEXT   NOT NULL,
    response_json     TEXT   NOT NULL,
    at_ms             BIGINT NOT NULL
);
-- A thread's calls in time order.
CREATE INDEX llm_calls_thread ON llm_calls (thread_id, at_ms);
