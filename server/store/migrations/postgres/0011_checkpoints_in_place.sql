-- A write now overwrites the checkpoint retention drops instead of inserting a new row and
-- deleting the old one (see the put statements in checkpointer.rs). PostgreSQL puts an updated
-- row's new version on the same page when it fits, and prunes the versions before it when a
-- page read finds less free space than the table's fillfactor leaves, so:
--
-- * fillfactor 70: inserts leave 30 % of each page free, and a page is pruned before its free
--   space drops below that. W1's rows are 1-3 KB, so the next version fits on its page after a
--   prune instead of moving to a new one.
-- * STORAGE MAIN on the large columns: they are still compressed (lz4 where 0010 set it), but
--   kept in the row unless the row would not fit in a page. Moved to the TOAST table, each
--   version of a state left its chunks in TOAST pages nothing reads again, for vacuum to find.
--
-- Both settings change only where new row versions go; existing rows stay as they are.
ALTER TABLE checkpoints SET (fillfactor = 70);
ALTER TABLE checkpoints
    ALTER COLUMN state SET STORAGE MAIN,
    ALTER COLUMN output SET STORAGE MAIN,
    ALTER COLUMN pending SET STORAGE MAIN;
