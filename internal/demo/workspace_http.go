package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// WorkspaceAPI is what the signups need of a workspace provider: the
// in-process [WorkspaceProvider], or a [WorkspaceClient] of one served
// over HTTP by another process (the crash test kills the process that
// calls it, so the provider must outlive it).
type WorkspaceAPI interface {
	// Create makes the workspace of owner under key, or returns the one
	// made under key before.
	Create(ctx context.Context, key, owner string) (Workspace, error)
	// Lookup returns the workspace made under key, if any.
	Lookup(ctx context.Context, key string) (Workspace, bool, error)
	// Delete deletes the workspace made under key; deleting none succeeds.
	Delete(ctx context.Context, key string) error
	// InjectFaults queues faults for the next calls concerning key.
	InjectFaults(ctx context.Context, key string, faults ...WorkspaceFault) error
	// List returns the live workspaces.
	List(ctx context.Context) ([]Workspace, error)
}

var (
	_ WorkspaceAPI = (*WorkspaceProvider)(nil)
	_ WorkspaceAPI = (*WorkspaceClient)(nil)
)

// WorkspaceCounts are the provider's counters for one key.
type WorkspaceCounts struct {
	Creates int `json:"creates"` // Create calls
	Effects int `json:"effects"` // workspaces actually created
	Deletes int `json:"deletes"` // workspaces actually deleted
}

type workspaceCreate struct {
	Key   string `json:"key"`
	Owner string `json:"owner"`
}

type workspaceFaults struct {
	Key    string           `json:"key"`
	Faults []WorkspaceFault `json:"faults"`
}

type workspaceProblem struct {
	Status  int    `json:"status"`
	Message string `json:"message"`
}

// WorkspaceHandler serves p over HTTP, for a [WorkspaceClient] in another
// process:
//
//	POST   /workspaces          {"key","owner"} → 201 workspace
//	GET    /workspaces?key=K    → 200 workspace | 404
//	GET    /workspaces          → 200 the live workspaces
//	DELETE /workspaces?key=K    → 204
//	POST   /faults              {"key","faults":[…]} → 204
//	GET    /counts?key=K        → 200 {"creates","effects","deletes"}
//
// A provider error is answered with its status and {"status","message"};
// a timeout fault (status 0) is answered 504, which the client turns back
// into an unknown outcome.
func WorkspaceHandler(p *WorkspaceProvider) http.Handler {
	mux := http.NewServeMux()
	fail := func(w http.ResponseWriter, err error) {
		var werr *WorkspaceError
		if !errors.As(err, &werr) {
			werr = &WorkspaceError{Status: http.StatusInternalServerError, Message: err.Error()}
		}
		status := werr.Status
		if status == 0 {
			status = http.StatusGatewayTimeout
		}
		writeJSON(w, status, workspaceProblem{Status: werr.Status, Message: werr.Message})
	}
	mux.HandleFunc("POST /workspaces", func(w http.ResponseWriter, r *http.Request) {
		var in workspaceCreate
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Key == "" {
			fail(w, &WorkspaceError{Status: http.StatusBadRequest, Message: "body must be {\"key\",\"owner\"}"})
			return
		}
		ws, err := p.Create(r.Context(), in.Key, in.Owner)
		if err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, ws)
	})
	mux.HandleFunc("GET /workspaces", func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		if key == "" {
			writeJSON(w, http.StatusOK, p.Workspaces())
			return
		}
		ws, ok, err := p.Lookup(r.Context(), key)
		switch {
		case err != nil:
			fail(w, err)
		case !ok:
			fail(w, &WorkspaceError{Status: http.StatusNotFound, Message: "no workspace under this key"})
		default:
			writeJSON(w, http.StatusOK, ws)
		}
	})
	mux.HandleFunc("DELETE /workspaces", func(w http.ResponseWriter, r *http.Request) {
		if err := p.Delete(r.Context(), r.URL.Query().Get("key")); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var in workspaceFaults
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Key == "" {
			fail(w, &WorkspaceError{Status: http.StatusBadRequest, Message: "body must be {\"key\",\"faults\"}"})
			return
		}
		p.Inject(in.Key, in.Faults...)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /counts", func(w http.ResponseWriter, r *http.Request) {
		c, e, d := p.Counts(r.URL.Query().Get("key"))
		writeJSON(w, http.StatusOK, WorkspaceCounts{Creates: c, Effects: e, Deletes: d})
	})
	return mux
}

// WorkspaceClient calls a provider served by [WorkspaceHandler]. An answer
// that never comes (a timeout, a connection cut after the request left)
// is a *WorkspaceError with status 0: the outcome is unknown.
type WorkspaceClient struct {
	// BaseURL is the handler's URL, e.g. http://127.0.0.1:4000.
	BaseURL string
	// HTTP is the client to use; nil means one with a 30s timeout.
	HTTP *http.Client
}

var defaultWorkspaceHTTP = &http.Client{Timeout: 30 * time.Second}

func (c *WorkspaceClient) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := strings.TrimSuffix(c.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultWorkspaceHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		// Sent or not, the answer is missing: the outcome is unknown.
		return &WorkspaceError{Message: "workspace provider did not answer: " + err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return &WorkspaceError{Message: "workspace provider answer cut: " + err.Error()}
	}
	if resp.StatusCode >= 300 {
		var p workspaceProblem
		if json.Unmarshal(b, &p) != nil || (p.Status == 0 && resp.StatusCode != http.StatusGatewayTimeout) {
			p = workspaceProblem{Status: resp.StatusCode, Message: fmt.Sprintf("workspace provider answered %d", resp.StatusCode)}
		}
		return &WorkspaceError{Status: p.Status, Message: p.Message}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return &WorkspaceError{Status: http.StatusBadGateway, Message: "workspace provider answer unreadable: " + err.Error()}
		}
	}
	return nil
}

// Create implements [WorkspaceAPI].
func (c *WorkspaceClient) Create(ctx context.Context, key, owner string) (Workspace, error) {
	var ws Workspace
	err := c.do(ctx, http.MethodPost, "/workspaces", nil, workspaceCreate{Key: key, Owner: owner}, &ws)
	return ws, err
}

// Lookup implements [WorkspaceAPI].
func (c *WorkspaceClient) Lookup(ctx context.Context, key string) (Workspace, bool, error) {
	var ws Workspace
	err := c.do(ctx, http.MethodGet, "/workspaces", url.Values{"key": {key}}, nil, &ws)
	var werr *WorkspaceError
	if errors.As(err, &werr) && werr.Status == http.StatusNotFound {
		return Workspace{}, false, nil
	}
	return ws, err == nil, err
}

// Delete implements [WorkspaceAPI].
func (c *WorkspaceClient) Delete(ctx context.Context, key string) error {
	return c.do(ctx, http.MethodDelete, "/workspaces", url.Values{"key": {key}}, nil, nil)
}

// InjectFaults implements [WorkspaceAPI].
func (c *WorkspaceClient) InjectFaults(ctx context.Context, key string, faults ...WorkspaceFault) error {
	return c.do(ctx, http.MethodPost, "/faults", nil, workspaceFaults{Key: key, Faults: faults}, nil)
}

// List implements [WorkspaceAPI].
func (c *WorkspaceClient) List(ctx context.Context) ([]Workspace, error) {
	var out []Workspace
	err := c.do(ctx, http.MethodGet, "/workspaces", nil, nil, &out)
	return out, err
}

// Counts returns the provider's counters for key.
func (c *WorkspaceClient) Counts(ctx context.Context, key string) (WorkspaceCounts, error) {
	var out WorkspaceCounts
	err := c.do(ctx, http.MethodGet, "/counts", url.Values{"key": {key}}, nil, &out)
	return out, err
}
