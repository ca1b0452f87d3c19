package consolecmd

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/unstuckhq/unstuck/internal/outbound"
	"github.com/unstuckhq/unstuck/internal/webhook"
)

// webhookFlags are the flags of the decision webhooks (SPEC K26,
// docs/events.md); the signing secret comes from the environment only.
type webhookFlags struct {
	urls        *urlList
	timeout     *time.Duration
	maxAttempts *int
}

// urlList is a repeatable flag of URLs, each value a comma-separated list.
// Its String, which help prints as the default, shows no credentials,
// query or fragment.
type urlList struct{ urls []string }

func (l *urlList) String() string {
	if l == nil {
		return ""
	}
	shown := make([]string, len(l.urls))
	for i, u := range l.urls {
		shown[i] = outbound.Display(u)
	}
	return strings.Join(shown, ",")
}

func (l *urlList) Set(s string) error {
	for u := range strings.SplitSeq(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			l.urls = append(l.urls, u)
		}
	}
	return nil
}

func addWebhookFlags(fs *flag.FlagSet, getenv func(string) string) webhookFlags {
	urls := &urlList{}
	_ = urls.Set(getenv("UNSTUCK_DECISION_WEBHOOK_URLS"))
	fromEnv := len(urls.urls) > 0
	fs.Func("decision-webhook-url", "post every decision event, signed, as a CloudEvent to this `URL` (repeatable, or a comma-separated list; env UNSTUCK_DECISION_WEBHOOK_URLS; the signing secret comes from UNSTUCK_DECISION_WEBHOOK_SECRET, at least 32 bytes)",
		func(s string) error {
			if fromEnv { // the command line replaces the environment's list
				urls.urls, fromEnv = nil, false
			}
			return urls.Set(s)
		})
	return webhookFlags{
		urls:        urls,
		timeout:     fs.Duration("decision-webhook-timeout", webhook.DefaultTimeout, "how long one decision webhook attempt may take"),
		maxAttempts: fs.Int("decision-webhook-max-attempts", webhook.DefaultMaxAttempts, "attempts of a decision event per webhook before it is given up (logged as failed on /webhooks)"),
	}
}

// config checks the flags and the secret and returns the relay's
// configuration, ok false when no URL is set. An error names the flag.
func (f webhookFlags) config(getenv func(string) string) (cfg webhook.Config, ok bool, err error) {
	if len(f.urls.urls) == 0 {
		return cfg, false, nil
	}
	for _, u := range f.urls.urls {
		if err := outbound.CheckURL(u); err != nil {
			return cfg, false, errors.New("--decision-webhook-url " + outbound.Display(u) + ": " + err.Error())
		}
	}
	secret := getenv("UNSTUCK_DECISION_WEBHOOK_SECRET")
	switch {
	case len(secret) < webhook.MinSecretBytes:
		return cfg, false, errors.New("--decision-webhook-url needs UNSTUCK_DECISION_WEBHOOK_SECRET, at least " + strconv.Itoa(webhook.MinSecretBytes) + " bytes")
	case *f.timeout <= 0:
		return cfg, false, errors.New("--decision-webhook-timeout must be positive")
	case *f.maxAttempts < 1:
		return cfg, false, errors.New("--decision-webhook-max-attempts must be at least 1")
	}
	return webhook.Config{Endpoints: f.urls.urls, Secret: []byte(secret), Timeout: *f.timeout, MaxAttempts: *f.maxAttempts}, true, nil
}

// startWebhooks runs the relay of cfg over db until ctx ends or the
// returned stop is called; stop waits for it. Only the leader among the
// consoles sharing the database delivers (store.DB.WebhookLeader).
func startWebhooks(ctx context.Context, db *database, cfg webhook.Config, source string, reg prometheus.Registerer, log *slog.Logger) (stop func(), err error) {
	cfg.Source, cfg.Registerer, cfg.Log = source, reg, log
	r, err := webhook.New(db.Trail, db.Console, cfg)
	if err != nil {
		return nil, err
	}
	log.Info("decision webhooks on", "endpoints", len(cfg.Endpoints), "max_attempts", cfg.MaxAttempts)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	return func() {
		cancel()
		wg.Wait()
	}, nil
}
