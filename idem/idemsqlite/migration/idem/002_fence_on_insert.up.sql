-- Reserve takes its fence inside its INSERT (issue 12): the statement reads
-- the counter, value + 1, and this trigger stores the fence it used back
-- into the counter in the same statement, so a reservation is one prepared
-- statement in autocommit instead of a transaction of four. Both run under
-- the write lock the INSERT holds, so fences still strictly increase across
-- all records, even after a record is deleted and reserved again. max()
-- keeps the counter from going back should a writer insert a fence it took
-- from the counter beforehand (takeover and older versions of the store do).
CREATE TRIGGER unstuck_idem_record_fence AFTER INSERT ON unstuck_idem_record
BEGIN
    UPDATE unstuck_idem_fence SET value = max(value, NEW.fence) WHERE id = 1;
END;
