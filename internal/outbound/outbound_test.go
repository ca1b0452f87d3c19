package outbound_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/outbound"
)

func TestWebhookOutbound(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://hooks.example/in", outbound.Display("https://user:pw@hooks.example/in?token=s3cret#x"))
	require.NoError(t, outbound.CheckURL("http://127.0.0.1:9/hook"))
	require.Error(t, outbound.CheckURL("ftp://hooks.example/in"))

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "yes", r.Header.Get("X-Test"))
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	status, err := outbound.Post(context.Background(), srv.Client(), srv.URL+"?token=s3cret", http.Header{"X-Test": {"yes"}}, []byte("{}"), 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)

	srv.Close()
	_, err = outbound.Post(context.Background(), http.DefaultClient, srv.URL+"/?token=s3cret", nil, nil, 0)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret", "no URL in the error")
	_, err = outbound.Post(context.Background(), http.DefaultClient, "http://[::1", nil, nil, 0)
	require.ErrorIs(t, err, outbound.ErrBadURL)
}
