-- Erases a thread (its checkpoints, idempotency records and row) in one round trip instead of a
-- transaction of five statements. The thread row is locked first, so that a concurrent
-- checkpoint put either commits before the erasure (and is erased with it) or loses its
-- compare-and-set after it. Each statement of a VOLATILE PL/pgSQL function takes a fresh snapshot
-- under READ COMMITTED, so the deletes see whatever such a put committed while this one waited.
CREATE FUNCTION frontdesk_delete_thread(p_thread_id TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM 1 FROM threads WHERE thread_id = p_thread_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    DELETE FROM checkpoints WHERE thread_id = p_thread_id;
    DELETE FROM idempotency_keys WHERE thread_id = p_thread_id;
    DELETE FROM threads WHERE thread_id = p_thread_id;
    RETURN TRUE;
END;
$$;
