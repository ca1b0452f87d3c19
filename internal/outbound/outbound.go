// Package outbound holds what the console's outgoing webhooks share: the
// check of a configured URL, the POST itself with its timeout, and error
// text that never carries the URL, which may hold a token.
package outbound

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// CheckURL validates a webhook or console address: an absolute http or
// https URL.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("not an absolute http(s) URL")
	}
	return nil
}

// Display is raw, an http(s) URL, as it may be shown and stored: without
// credentials, query or fragment, where tokens travel.
func Display(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// RedactError keeps an HTTP client error's cause without its URL.
func RedactError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// ErrBadURL is Post's error for a URL it cannot make a request of.
var ErrBadURL = errors.New("invalid webhook URL")

// Post posts body to hook with client within timeout (none when <= 0),
// with the headers in header, and returns the response's status. The
// response's body is drained, at most 64 KiB of it, and never returned:
// it may echo anything. An error is redacted ([RedactError]).
func Post(ctx context.Context, client *http.Client, hook string, header http.Header, body []byte, timeout time.Duration) (int, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook, bytes.NewReader(body))
	if err != nil {
		return 0, ErrBadURL
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, errors.New(RedactError(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}
