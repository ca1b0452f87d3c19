package web_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// apiReference is the OpenAPI document rendered for readers.
const apiReference = "../../docs/api-reference.md"

// TestAPIReferenceRendersTheDocument: docs/api-reference.md is the
// served OpenAPI document rendered as Markdown, route by route, so the
// reference a reader finds in the docs cannot drift from what the API
// serves. UNSTUCK_UPDATE_DOCS=1 rewrites it after a change of the document.
func TestAPIReferenceRendersTheDocument(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("openapi.json") // the document the API embeds and serves
	require.NoError(t, err)
	want := renderOpenAPI(t, doc)
	if os.Getenv("UNSTUCK_UPDATE_DOCS") == "1" {
		require.NoError(t, os.WriteFile(apiReference, []byte(want), 0o644))
	}
	got, err := os.ReadFile(apiReference)
	require.NoError(t, err)
	require.Equal(t, want, string(got), "docs/api-reference.md is behind internal/web/openapi.json: run UNSTUCK_UPDATE_DOCS=1 go test -run TestAPIReferenceRendersTheDocument ./internal/web/")
}

type openAPIRef struct {
	Ref string `json:"$ref"`
}

type openAPIParam struct {
	openAPIRef
	Name        string `json:"name"`
	In          string `json:"in"`
	Required    bool   `json:"required"`
	Description string `json:"description"`
}

type openAPIResponse struct {
	openAPIRef
	Description string `json:"description"`
	Content     map[string]struct {
		Schema openAPIRef `json:"schema"`
	} `json:"content"`
}

type openAPIOperation struct {
	Summary     string                     `json:"summary"`
	Description string                     `json:"description"`
	Parameters  []openAPIParam             `json:"parameters"`
	Responses   map[string]openAPIResponse `json:"responses"`
	RequestBody *struct {
		Content map[string]struct {
			Schema openAPIRef `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
}

// renderOpenAPI renders doc: its title and description, then every path
// and method in order with its parameters, body and answers, $refs
// resolved to their names.
func renderOpenAPI(t *testing.T, doc []byte) string {
	t.Helper()
	var d struct {
		Info struct {
			Title       string `json:"title"`
			Version     string `json:"version"`
			Description string `json:"description"`
		} `json:"info"`
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths      map[string]map[string]openAPIOperation `json:"paths"`
		Components struct {
			Parameters map[string]openAPIParam    `json:"parameters"`
			Responses  map[string]openAPIResponse `json:"responses"`
			Schemas    map[string]struct {
				Properties map[string]struct {
					Type        any      `json:"type"`
					Enum        []string `json:"enum"`
					Description string   `json:"description"`
				} `json:"properties"`
				Required []string `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(doc, &d))
	require.Len(t, d.Servers, 1)
	name := func(ref string) string { return ref[strings.LastIndexByte(ref, '/')+1:] }
	var b strings.Builder
	fmt.Fprintf(&b, "# %s, version %s\n\n", d.Info.Title, d.Info.Version)
	b.WriteString("<!-- Rendered from internal/web/openapi.json, which the console serves at /api/v1/openapi.json;\n")
	b.WriteString("     TestAPIReferenceRendersTheDocument fails when the two differ. Do not edit by hand. -->\n\n")
	fmt.Fprintf(&b, "%s See [the operator API](api.md) for tokens, limits and examples.\n", d.Info.Description)
	paths := make([]string, 0, len(d.Paths))
	for p := range d.Paths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		methods := make([]string, 0, len(d.Paths[p]))
		for m := range d.Paths[p] {
			methods = append(methods, m)
		}
		slices.Sort(methods)
		for _, m := range methods {
			op := d.Paths[p][m]
			fmt.Fprintf(&b, "\n## `%s %s%s`\n\n%s\n", strings.ToUpper(m), d.Servers[0].URL, p, op.Summary)
			if op.Description != "" {
				fmt.Fprintf(&b, "\n%s\n", op.Description)
			}
			if len(op.Parameters) > 0 {
				b.WriteString("\n| parameter | in | required | description |\n|---|---|---|---|\n")
				for _, prm := range op.Parameters {
					if prm.Ref != "" {
						resolved, ok := d.Components.Parameters[name(prm.Ref)]
						require.True(t, ok, "%s %s: unknown parameter %s", m, p, prm.Ref)
						prm = resolved
					}
					fmt.Fprintf(&b, "| `%s` | %s | %t | %s |\n", prm.Name, prm.In, prm.Required, strings.ReplaceAll(prm.Description, "|", `\|`))
				}
			}
			if op.RequestBody != nil {
				for ct, c := range op.RequestBody.Content {
					fmt.Fprintf(&b, "\nBody: `%s`, schema `%s`.\n", ct, name(c.Schema.Ref))
				}
			}
			codes := make([]string, 0, len(op.Responses))
			for c := range op.Responses {
				codes = append(codes, c)
			}
			slices.Sort(codes)
			b.WriteString("\n| answer | description |\n|---|---|\n")
			for _, c := range codes {
				r := op.Responses[c]
				if r.Ref != "" {
					resolved, ok := d.Components.Responses[name(r.Ref)]
					require.True(t, ok, "%s %s: unknown response %s", m, p, r.Ref)
					r = resolved
				}
				desc := r.Description
				for ct, content := range r.Content {
					if content.Schema.Ref != "" {
						desc += fmt.Sprintf(" (`%s`, `%s`)", ct, name(content.Schema.Ref))
					}
				}
				fmt.Fprintf(&b, "| %s | %s |\n", c, desc)
			}
		}
	}
	b.WriteString("\n## Schemas\n")
	schemas := make([]string, 0, len(d.Components.Schemas))
	for n := range d.Components.Schemas {
		schemas = append(schemas, n)
	}
	slices.Sort(schemas)
	for _, n := range schemas {
		sc := d.Components.Schemas[n]
		fmt.Fprintf(&b, "\n### `%s`\n\n| field | type | required | description |\n|---|---|---|---|\n", n)
		fields := make([]string, 0, len(sc.Properties))
		for f := range sc.Properties {
			fields = append(fields, f)
		}
		slices.Sort(fields)
		for _, f := range fields {
			prop := sc.Properties[f]
			typ := fmt.Sprint(prop.Type)
			if len(prop.Enum) > 0 {
				typ += ": " + strings.Join(prop.Enum, ", ")
			}
			fmt.Fprintf(&b, "| `%s` | %s | %t | %s |\n", f, typ, slices.Contains(sc.Required, f), strings.ReplaceAll(prop.Description, "|", `\|`))
		}
	}
	return b.String()
}
