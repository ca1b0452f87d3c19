package audit

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Export formats.
const (
	FormatCSV   = "csv"
	FormatJSONL = "jsonl"
)

// defaultExportPage is how many entries Export reads per query.
const defaultExportPage = 1000

// timeLayout is how exports write At: RFC 3339, UTC, to the microsecond.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// csvHeader names the columns of a CSV export, in order.
var csvHeader = []string{"seq", "at", "actor", "role", "action", "target_kind", "target_id", "reason",
	"before", "after", "outcome", "request_id", "client_addr", "user_agent", "prev_hash", "hash", "key_id"}

// Export writes every entry f selects to w, newest first, from f.After on
// (f.Limit is ignored), as format:
//
//   - [FormatCSV]: a header row, then one row per entry (RFC 4180); at in
//     RFC 3339 UTC to the microsecond, states as JSON text, hashes in hex.
//     A text cell that a spreadsheet would take for a formula (starting
//     with =, +, -, @, tab or carriage return) is prefixed with an
//     apostrophe, as OWASP's CSV-injection advice has it.
//   - [FormatJSONL]: one JSON object per line, as [Entry.MarshalJSON]
//     writes it, exact: each line can be decoded into an Entry whose hash
//     can be checked ([Keyring.ComputeHash], with the audit key).
//
// Entries are read in pages of one query each and written as they come,
// so memory stays flat whatever the trail's size; entries appended while
// Export runs are not included. An unknown format is refused before
// anything is written; a failed write of w stops the export with its
// error. Exporting is not recorded: the caller appends an OutcomeRead
// entry.
func (t *Trail) Export(ctx context.Context, f Filter, w io.Writer, format string) error {
	if err := f.check(); err != nil {
		return err
	}
	var (
		write func(*Entry) error
		flush func() error
	)
	switch format {
	case FormatCSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(csvHeader); err != nil {
			return fmt.Errorf("audit: export: %w", err)
		}
		row := make([]string, len(csvHeader))
		write = func(e *Entry) error { return cw.Write(csvRow(row, e)) }
		flush = func() error { cw.Flush(); return cw.Error() }
	case FormatJSONL:
		bw := bufio.NewWriter(w)
		enc := json.NewEncoder(bw) // Encode ends each value with a newline
		enc.SetEscapeHTML(false)
		write = func(e *Entry) error { return enc.Encode(e) }
		flush = bw.Flush
	default:
		return invalid("format", fmt.Sprintf("%q is not csv or jsonl", format))
	}
	for {
		entries, next, err := t.page(ctx, f, t.exportPage)
		if err != nil {
			return fmt.Errorf("audit: export: %w", err)
		}
		for i := range entries {
			if err := write(&entries[i]); err != nil {
				return fmt.Errorf("audit: export: %w", err)
			}
		}
		if err := flush(); err != nil {
			return fmt.Errorf("audit: export: %w", err)
		}
		if next == 0 {
			return nil
		}
		f.After = next
	}
}

// csvRow fills row with e's cells, in csvHeader's order.
func csvRow(row []string, e *Entry) []string {
	row[0] = strconv.FormatInt(e.Seq, 10)
	row[1] = e.At.UTC().Format(timeLayout)
	for i, s := range []string{e.Actor, e.Role, e.Action, e.TargetKind, e.TargetID, e.Reason,
		string(e.Before), string(e.After), e.Outcome, e.RequestID, e.ClientAddr, e.UserAgent} {
		row[2+i] = csvText(s)
	}
	row[14] = hex.EncodeToString(e.PrevHash)
	row[15] = hex.EncodeToString(e.Hash)
	row[16] = e.KeyID
	return row
}

// csvText defuses a cell that a spreadsheet would evaluate as a formula.
func csvText(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// jsonEntry is the JSON form of an Entry.
type jsonEntry struct {
	Seq        int64           `json:"seq"`
	At         string          `json:"at"`
	Actor      string          `json:"actor"`
	Role       string          `json:"role"`
	Action     string          `json:"action"`
	TargetKind string          `json:"target_kind"`
	TargetID   string          `json:"target_id"`
	Reason     string          `json:"reason"`
	Before     json.RawMessage `json:"before"`
	After      json.RawMessage `json:"after"`
	Outcome    string          `json:"outcome"`
	RequestID  string          `json:"request_id"`
	ClientAddr string          `json:"client_addr"`
	UserAgent  string          `json:"user_agent"`
	PrevHash   string          `json:"prev_hash"`
	Hash       string          `json:"hash"`
	KeyID      string          `json:"key_id"`
}

// MarshalJSON writes e with snake_case names, at in RFC 3339 UTC to the
// microsecond, the states as JSON values (null when absent) and the hashes
// in hex, and key_id ("" for a legacy entry).
func (e Entry) MarshalJSON() ([]byte, error) {
	return json.Marshal(jsonEntry{
		Seq: e.Seq, At: e.At.UTC().Format(timeLayout), Actor: e.Actor, Role: e.Role, Action: e.Action,
		TargetKind: e.TargetKind, TargetID: e.TargetID, Reason: e.Reason,
		Before: nullJSON(e.Before), After: nullJSON(e.After), Outcome: e.Outcome,
		RequestID: e.RequestID, ClientAddr: e.ClientAddr, UserAgent: e.UserAgent,
		PrevHash: hex.EncodeToString(e.PrevHash), Hash: hex.EncodeToString(e.Hash), KeyID: e.KeyID,
	})
}

// UnmarshalJSON reads what MarshalJSON writes, so that an exported entry
// can be checked with [Keyring.ComputeHash].
func (e *Entry) UnmarshalJSON(b []byte) error {
	var j jsonEntry
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339Nano, j.At)
	if err != nil {
		return fmt.Errorf("audit: entry at: %w", err)
	}
	prev, err := hex.DecodeString(j.PrevHash)
	if err != nil {
		return fmt.Errorf("audit: entry prev_hash: %w", err)
	}
	hash, err := hex.DecodeString(j.Hash)
	if err != nil {
		return fmt.Errorf("audit: entry hash: %w", err)
	}
	*e = Entry{
		Seq: j.Seq, At: at.UTC(), Actor: j.Actor, Role: j.Role, Action: j.Action,
		TargetKind: j.TargetKind, TargetID: j.TargetID, Reason: j.Reason,
		Before: stateJSON(j.Before), After: stateJSON(j.After), Outcome: j.Outcome,
		RequestID: j.RequestID, ClientAddr: j.ClientAddr, UserAgent: j.UserAgent,
		PrevHash: prev, Hash: hash, KeyID: j.KeyID,
	}
	return nil
}

// nullJSON is a state as a JSON value: null when absent.
func nullJSON(state json.RawMessage) json.RawMessage {
	if len(state) == 0 {
		return json.RawMessage("null")
	}
	return state
}

// stateJSON is a decoded JSON value as a state: nil for null. A stored
// state of JSON null is therefore read back as absent; the console never
// stores one.
func stateJSON(v json.RawMessage) json.RawMessage {
	if string(v) == "null" {
		return nil
	}
	return v
}
