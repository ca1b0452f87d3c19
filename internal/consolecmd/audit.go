package consolecmd

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/unstuckhq/unstuck/internal/audit"
)

const auditUsage = `Usage:
  console audit verify --db URL [--checkpoint LINE]... [--checkpoint-file PATH]... [--anchor SEQ:HASH]... [--allow-legacy]
  console audit checkpoint --db URL [--out PATH]

verify walks the audit trail's chain from seq 1 and reports the first entry
that is missing, altered or forged; the exit status is non-zero if the chain
is broken, and if no entry is keyed (a chain rewritten without the key looks
like that) unless --allow-legacy. Entries are MACed with the audit key, so
verifying needs it too. It checks the chain against the trail's keying
marker, the last checkpoint stored in the database and every checkpoint
given. On success it prints the head as SEQ:HASH.

checkpoint verifies the chain, then prints its head and keying with a MAC
under the audit key on one line to stdout, and stores it in the database for
/audit; --out also writes it to a file (appended) or a directory (a new file
each time). Keep checkpoints outside the database, where its owner cannot
rewrite them ("console serve --audit-checkpoint-dir" writes one every hour),
and pass them back with verify --checkpoint-file to detect a trail cut,
emptied or rewritten, even when the database's copies were rewritten too.

The audit key comes from the environment only: UNSTUCK_AUDIT_KEY (at least
32 bytes, not the application secret), with UNSTUCK_AUDIT_PREVIOUS_KEYS
(comma-separated) for the keys it replaced.

`

// runAudit runs "console audit <subcommand>": verify or checkpoint.
func runAudit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, auditUsage)
		return errUsage
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "verify":
		return runAuditVerify(ctx, rest, getenv, stdout, stderr)
	case "checkpoint":
		return runAuditCheckpoint(ctx, rest, getenv, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, auditUsage)
		return nil
	default:
		fmt.Fprintf(stderr, "console audit: unknown subcommand %q\n\n%s", sub, auditUsage)
		return errUsage
	}
}

// auditKeysFromEnv reads the audit keyring from UNSTUCK_AUDIT_KEY and
// UNSTUCK_AUDIT_PREVIOUS_KEYS. It refuses a missing or short key, and a key
// equal to an application secret (UNSTUCK_SECRET, UNSTUCK_PREVIOUS_SECRETS),
// which the applications hold, or to the public demo's. The error never
// holds a key.
func auditKeysFromEnv(getenv func(string) string) (*audit.Keyring, error) {
	current := getenv("UNSTUCK_AUDIT_KEY")
	if len(current) < audit.MinKeyBytes {
		return nil, fmt.Errorf("UNSTUCK_AUDIT_KEY must be set to at least %d bytes: the audit trail's entries and checkpoints are MACed with it (e.g. openssl rand -base64 48); it is never a flag", audit.MinKeyBytes)
	}
	previous := splitList(getenv("UNSTUCK_AUDIT_PREVIOUS_KEYS"))
	secrets := append(splitList(getenv("UNSTUCK_PREVIOUS_SECRETS")), getenv("UNSTUCK_SECRET"))
	for i, k := range append([]string{current}, previous...) {
		name := "UNSTUCK_AUDIT_KEY"
		if i > 0 {
			name = fmt.Sprintf("UNSTUCK_AUDIT_PREVIOUS_KEYS (key %d)", i)
		}
		for _, s := range secrets {
			if s != "" && hmac.Equal([]byte(k), []byte(s)) {
				return nil, fmt.Errorf("%s must not be an application secret: the applications hold those, and could then forge audit entries", name)
			}
		}
		if i == 0 && hmac.Equal([]byte(k), demoAuditKey(demoSecret)) {
			return nil, errors.New("UNSTUCK_AUDIT_KEY is the public demo's audit key: set a key of your own")
		}
	}
	prev := make([][]byte, len(previous))
	for i, p := range previous {
		prev[i] = []byte(p)
	}
	return audit.NewKeyring([]byte(current), prev...)
}

// demoAuditKey derives the demo's audit key from its application secret,
// for a demo started without UNSTUCK_AUDIT_KEY. It is as public as the
// secret it comes from: a demo's trail is not evidence.
func demoAuditKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("unstuck demo audit key"))
	return m.Sum(nil)
}

// demoAuditKeys is the demo's audit keyring: UNSTUCK_AUDIT_KEY when set,
// else a key derived from the demo's secret, which it logs it uses.
func demoAuditKeys(getenv func(string) string, secret string, log *slog.Logger) (*audit.Keyring, error) {
	if getenv("UNSTUCK_AUDIT_KEY") != "" {
		return auditKeysFromEnv(getenv)
	}
	log.Warn("UNSTUCK_AUDIT_KEY is not set: MACing the demo's audit trail with a key derived from the demo's secret, as public as that secret")
	return audit.NewKeyring(demoAuditKey(secret))
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// useAuditKeys makes d's trail one that appends, verifies and checkpoints
// with keys.
func (d *database) useAuditKeys(keys *audit.Keyring) {
	switch {
	case d.MySQL != nil:
		d.Trail = audit.NewMySQL(d.MySQL, audit.WithKeys(keys))
	case d.Pool != nil:
		d.Trail = audit.NewPostgres(d.Pool, audit.WithKeys(keys))
	default:
		d.Trail = audit.NewSQLite(d.SQL, audit.WithKeys(keys))
	}
}

// openAudit parses an audit subcommand's flags (with extra ones added by
// flags), reads the audit key and opens the database with a keyed trail.
// It returns errUsage after printing why on a usage error, and a nil
// database with a nil error for --help.
func openAudit(ctx context.Context, name string, args []string, getenv func(string) string, stdout, stderr io.Writer, flags func(*flag.FlagSet)) (*database, error) {
	fs := flag.NewFlagSet("audit "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := dbFlag(fs, getenv, "database `URL`: postgres://…, mysql://… or sqlite:PATH (env UNSTUCK_DB)")
	if flags != nil {
		flags(fs)
	}
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), auditUsage)
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args, stdout, stderr); help || err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "console audit %s: unexpected argument %q\n", name, fs.Arg(0))
		return nil, errUsage
	}
	if *dbURL == "" {
		*dbURL = getenv("UNSTUCK_DB")
	}
	if *dbURL == "" {
		fmt.Fprintf(stderr, "console audit %s: --db is required (or set UNSTUCK_DB)\n", name)
		return nil, errUsage
	}
	keys, err := auditKeysFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	db, err := openDatabase(ctx, *dbURL)
	if err != nil {
		return nil, err
	}
	db.useAuditKeys(keys)
	return db, nil
}

func runAuditVerify(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		anchors     []audit.Anchor
		checkpoints []audit.Checkpoint
		allowLegacy bool
	)
	db, err := openAudit(ctx, "verify", args, getenv, stdout, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&allowLegacy, "allow-legacy", false, "accept a trail whose entries are all legacy SHA-256 links (a trail written before the audit key, not keyed yet); without it such a trail fails, as a rewrite without the key would")
		fs.Func("checkpoint-file", "a `PATH` with checkpoints: a file of lines as console audit checkpoint prints them, or a directory written by --audit-checkpoint-dir (repeatable)", func(path string) error {
			cs, err := readCheckpoints(path)
			if err != nil {
				return err
			}
			if len(cs) == 0 {
				return fmt.Errorf("%s holds no checkpoint", path)
			}
			checkpoints = append(checkpoints, cs...)
			return nil
		})
		fs.Func("checkpoint", "a `LINE` printed by console audit checkpoint, kept outside the database (repeatable)", func(s string) error {
			c, err := audit.ParseCheckpoint(s)
			if err != nil {
				return err
			}
			checkpoints = append(checkpoints, c)
			return nil
		})
		fs.Func("anchor", "a head printed by an earlier verification, as `SEQ:HASH` (repeatable)", func(s string) error {
			a, err := audit.ParseAnchor(s)
			if err != nil {
				return err
			}
			anchors = append(anchors, a)
			return nil
		})
	})
	if db == nil || err != nil {
		return err
	}
	defer db.Close()
	// The last checkpoint stored in the database counts too: it catches a
	// trail cut or emptied by someone who left the checkpoints alone.
	stored, ok, err := db.Trail.LastCheckpoint(ctx)
	if err != nil {
		return fmt.Errorf("verify the audit trail of %s: %w", db.Redacted, err)
	}
	if ok && !slices.ContainsFunc(checkpoints, func(c audit.Checkpoint) bool { return c.Seq == stored.Seq }) {
		// One kept outside for the same seq is the one to trust: if they
		// differ, the verification against it says so.
		checkpoints = append(checkpoints, stored)
	}
	for _, c := range checkpoints {
		if err := db.Trail.CheckCheckpoint(c); err != nil {
			return fmt.Errorf("checkpoint of seq %d made at %s: %w", c.Seq, c.At.Format("2006-01-02T15:04:05Z"), err)
		}
		anchors = append(anchors, c.Anchor())
	}
	v, err := db.Trail.Verify(ctx, anchors...)
	if err != nil {
		return fmt.Errorf("verify the audit trail of %s: %w", db.Redacted, err)
	}
	if !v.OK {
		fmt.Fprintf(stdout, "%d entries verified before the break\n", v.Checked)
		return fmt.Errorf("audit trail broken at seq %d: %s", v.FirstBad, v.Problem)
	}
	fmt.Fprintf(stdout, "audit trail verified: %d entries\n", v.Checked)
	switch {
	case v.Checked == 0:
	case v.KeyedFrom == 1:
		fmt.Fprintln(stdout, "keyed: every entry is MACed with the audit key")
	case v.KeyedFrom > 1:
		fmt.Fprintf(stdout, "keyed from seq %d: seq 1 to %d are legacy SHA-256 links from before the audit key\n", v.KeyedFrom, v.KeyedFrom-1)
	case allowLegacy:
		fmt.Fprintln(stdout, "not keyed yet: every entry is a legacy SHA-256 link from before the audit key; the next one appended starts the keyed part")
	default:
		return fmt.Errorf("audit trail not keyed: every entry is a legacy SHA-256 link, which anyone who can write the table can rewrite; if the trail was written before the audit key and nothing was appended since, pass --allow-legacy")
	}
	if len(checkpoints) > 0 {
		fmt.Fprintf(stdout, "checkpoints verified: %d\n", len(checkpoints))
	}
	if v.HeadSeq > 0 {
		fmt.Fprintf(stdout, "head: %s\n", audit.Anchor{Seq: v.HeadSeq, Hash: v.Head})
	}
	return nil
}

func runAuditCheckpoint(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var out string
	db, err := openAudit(ctx, "checkpoint", args, getenv, stdout, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&out, "out", "", "also write the checkpoint to this `PATH`: a directory gets a new file of its own (never overwritten), a file gets the line appended")
	})
	if db == nil || err != nil {
		return err
	}
	defer db.Close()
	c, v, err := db.Trail.Checkpoint(ctx)
	if err != nil {
		if errors.Is(err, audit.ErrBroken) {
			return fmt.Errorf("no checkpoint: audit trail broken at seq %d: %s", v.FirstBad, v.Problem)
		}
		return fmt.Errorf("checkpoint the audit trail of %s: %w", db.Redacted, err)
	}
	fmt.Fprintln(stdout, c.String())
	if out != "" {
		if _, err := writeCheckpoint(out, c); err != nil {
			return err
		}
	}
	return nil
}
