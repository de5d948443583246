-- A checkpoint's `interrupt` column becomes `pending`: the JSON of the runtime's `Pending`
-- (every pending interrupt with its id, the ids of answered interrupts, and the finished tasks
-- of a fan-out step in progress). Values written before hold one interrupt object, which the
-- runtime still reads. Keep in step with migrations/sqlite.
ALTER TABLE checkpoints RENAME COLUMN interrupt TO pending;
