-- Until issue 11 this migration replaced an index of the console's on the
-- engine's record table by two partial indexes of processing
-- records. Those indexes now belong to the driver's "idem" line
-- (idemsqlite's migration 003, same names, IF NOT EXISTS), which creates them on a
-- fresh database and finds them on one migrated before. The version stays
-- so that the console's line keeps its numbers; it changes nothing.
SELECT 1;
