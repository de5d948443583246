-- Checkpoint states are compressed with lz4 instead of pglz where the server offers it
-- (PostgreSQL 14 and later built with lz4, as Debian's packages and the official images are).
-- A state over about 2 KB is compressed on every write; with pglz that compression was about an
-- eighth of the server's CPU under W1 load. Rows written before keep pglz: PostgreSQL reads
-- either. No SQLite counterpart: SQLite does not compress.
--
-- Where lz4 is not offered the column keeps pglz, and the migration says so in a notice rather
-- than failing: the choice changes the CPU a write costs, not what is stored.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings
               WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE checkpoints ALTER COLUMN state SET COMPRESSION lz4;
    ELSE
        RAISE NOTICE 'this PostgreSQL server offers no lz4 compression: checkpoint states stay compressed with pglz';
    END IF;
END
$$;
