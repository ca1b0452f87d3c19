-- 002_processing_index.up.sql changes nothing; neither does this.
SELECT 1;
