DROP TABLE IF EXISTS unstuck_saga_finding;
DROP TABLE IF EXISTS unstuck_saga_event;
DROP TABLE IF EXISTS unstuck_saga_step;
DROP TABLE IF EXISTS unstuck_saga_operation;
