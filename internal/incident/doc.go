// Package incident groups what is going wrong by cause (SPEC K14) and
// records counts per state over time (SPEC K15).
//
// [Normalize] turns an error message into its pattern: numbers, hex IDs,
// UUIDs, e-mail addresses, quoted values and the paths of URLs are replaced
// by placeholders, so that "mailbox bob+17@example.com does not exist" and
// "mailbox alice+3@example.com does not exist" are one group. A group is
// identified by [Fields.Key], a hash of the kind, the state, the operation
// (or saga type and step), the error class, the normalized message and the
// external system.
//
// A [Snapshotter] runs in the console: once a minute the leader (the
// console holding a PostgreSQL advisory lock; with SQLite, the single
// writer) counts keys and operations per state through the drivers' admin
// contracts into the trend table, and recomputes the incident groups from
// the keys that are stuck, pending, unavailable or failed and the
// operations under review or failed, scanning at most a bounded number of
// records per state (a group past that bound is counted as "at least N").
// The console's pages then read only those tables: no page view scans the
// engine's records.
package incident
