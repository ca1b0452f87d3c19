package consolecmd

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"net/url"
	"strings"
)

// parseFlags parses args with fs. For -h or --help it prints fs's usage on
// stdout and returns help = true and a nil error: the command is done. For
// a bad command line it prints the error and the usage on stderr and
// returns errUsage (exit status 2). Later writes to fs's output go to
// stderr.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (help bool, err error) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err = fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = out.WriteTo(stdout)
		return true, nil
	case err != nil:
		_, _ = out.WriteTo(stderr)
		return false, errUsage
	}
	return false, nil
}

// dbFlag defines --db on fs, defaulting to UNSTUCK_DB. Help and usage show
// that default with its password redacted ([redactURL]); the returned
// string is the URL as given.
func dbFlag(fs *flag.FlagSet, getenv func(string) string, usage string) *string {
	v := &databaseURL{raw: getenv("UNSTUCK_DB")}
	fs.Var(v, "db", usage)
	return &v.raw
}

// databaseURL is a flag.Value whose String, which flag prints as the
// default, never holds a password.
type databaseURL struct{ raw string }

func (d *databaseURL) String() string {
	if d == nil {
		return ""
	}
	return redactURL(d.raw)
}

func (d *databaseURL) Set(s string) error {
	d.raw = s
	return nil
}

// redactURL returns a database URL fit for help, logs and messages: a
// PostgreSQL URL with the password of its user info and of a "password"
// query parameter replaced by "xxxxx", an sqlite: URL as it is, and
// anything else cut after its scheme ([schemeOf]).
func redactURL(raw string) string {
	switch {
	case raw == "", strings.HasPrefix(raw, "sqlite:"):
		return raw
	case isMySQL(raw):
		return redactMySQL(raw)
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		u, err := url.Parse(raw)
		if err != nil {
			return schemeOf(raw)
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	default:
		return schemeOf(raw)
	}
}
