package unstuck

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// docLinkPackages are the directories of the public packages whose doc
// comments are checked: every package under idem/ and saga/ but their
// internal ones.
func docLinkPackages(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, root := range []string{"idem", "saga"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if d.Name() == "internal" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if m, _ := filepath.Glob(filepath.Join(path, "*.go")); len(m) > 0 {
				dirs = append(dirs, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

// parsedPackage is a package's go/doc view, built from its non-test files.
func parsedPackage(t *testing.T, dir, importPath string) *doc.Package {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.Name.Name == "main" || strings.HasSuffix(f.Name.Name, "_test") {
			continue
		}
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b *ast.File) int { return strings.Compare(fset.File(a.Pos()).Name(), fset.File(b.Pos()).Name()) })
	p, err := doc.NewFromFiles(fset, files, importPath)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return p
}

// exportedNames is the set of names a doc link into importPath can name:
// its exported constants, variables, functions and types, and each type's
// exported methods and fields as "Type.Name".
type exportedNames map[string]bool

var (
	exportedMu    sync.Mutex
	exportedCache = map[string]exportedNames{}
)

// namesOf loads the exported names of importPath, from the module's own
// tree or, for another module or the standard library, from the directory
// "go list" names.
func namesOf(t *testing.T, importPath string) exportedNames {
	t.Helper()
	exportedMu.Lock()
	defer exportedMu.Unlock()
	if n, ok := exportedCache[importPath]; ok {
		return n
	}
	const module = "github.com/unstuckhq/unstuck"
	dir := ""
	if rest, ok := strings.CutPrefix(importPath, module+"/"); ok {
		dir = filepath.FromSlash(rest)
	} else {
		out, err := exec.Command("go", "list", "-f", "{{.Dir}}", importPath).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", importPath, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	p := parsedPackage(t, dir, importPath)
	names := exportedNames{}
	for _, v := range append(p.Consts, p.Vars...) {
		for _, n := range v.Names {
			names[n] = true
		}
	}
	for _, f := range p.Funcs {
		names[f.Name] = true
	}
	for _, ty := range p.Types {
		names[ty.Name] = true
		for _, v := range append(ty.Consts, ty.Vars...) {
			for _, n := range v.Names {
				names[n] = true
			}
		}
		for _, f := range append(ty.Funcs, ty.Methods...) {
			names[f.Name] = true
			names[ty.Name+"."+f.Name] = true
		}
		for _, spec := range ty.Decl.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok {
				continue
			}
			var fields *ast.FieldList
			switch st := ts.Type.(type) {
			case *ast.StructType:
				fields = st.Fields
			case *ast.InterfaceType:
				fields = st.Methods
			}
			if fields == nil {
				continue
			}
			for _, f := range fields.List {
				for _, n := range f.Names {
					names[ty.Name+"."+n.Name] = true
				}
			}
		}
	}
	exportedCache[importPath] = names
	return names
}

// linkLike is bracketed text that reads as a doc link — [Name],
// [Type.Method], [pkg.Name] or [*Type] — not preceded by a letter, digit,
// '_' or ']' (so map[string]T, Result[T] and [][]byte are not taken).
var linkLike = regexp.MustCompile(`(^|[^\w\]])\[(\*?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){0,2})\]`)

// docTexts returns every doc comment of p with where it is: the package
// comment, and the comments of its exported declarations and their
// methods.
func docTexts(p *doc.Package) map[string]string {
	out := map[string]string{"package " + p.Name: p.Doc}
	add := func(name, text string) {
		if text != "" {
			out[name] = text
		}
	}
	for _, v := range append(p.Consts, p.Vars...) {
		add(strings.Join(v.Names, ","), v.Doc)
	}
	for _, f := range p.Funcs {
		add(f.Name, f.Doc)
	}
	for _, ty := range p.Types {
		add(ty.Name, ty.Doc)
		for _, v := range append(ty.Consts, ty.Vars...) {
			add(strings.Join(v.Names, ","), v.Doc)
		}
		for _, f := range append(ty.Funcs, ty.Methods...) {
			add(ty.Name+"."+f.Name, f.Doc)
		}
	}
	return out
}

// walkText calls plain for each run of plain text and link for each doc
// link of the parsed comment d, skipping code blocks.
func walkText(d *comment.Doc, plain func(string), link func(*comment.DocLink)) {
	var texts func([]comment.Text)
	texts = func(ts []comment.Text) {
		for _, x := range ts {
			switch x := x.(type) {
			case comment.Plain:
				plain(string(x))
			case comment.Italic:
				plain(string(x))
			case *comment.Link:
				texts(x.Text)
			case *comment.DocLink:
				link(x)
			}
		}
	}
	var blocks func([]comment.Block)
	blocks = func(bs []comment.Block) {
		for _, b := range bs {
			switch b := b.(type) {
			case *comment.Paragraph:
				texts(b.Text)
			case *comment.Heading:
				texts(b.Text)
			case *comment.List:
				for _, it := range b.Items {
					blocks(it.Content)
				}
			}
		}
	}
	blocks(d.Content)
}

// TestDocLinksResolve: in the doc comments of the public packages under
// idem/ and saga/, every doc link names something that exists ([Name] in
// the package, [pkg.Name] in the package pkg stands for), and no
// bracketed name was left as text because go/doc could not resolve it,
// as [Digest] in idemdriver would be (Digest is idem's; it is written
// [idem.Digest] there, which needs idem among the package's imports).
func TestDocLinksResolve(t *testing.T) {
	const module = "github.com/unstuckhq/unstuck"
	for _, dir := range docLinkPackages(t) {
		importPath := module + "/" + filepath.ToSlash(dir)
		p := parsedPackage(t, dir, importPath)
		parser := p.Parser()
		for where, text := range docTexts(p) {
			d := parser.Parse(text)
			walkText(d, func(s string) {
				for _, m := range linkLike.FindAllStringSubmatch(s, -1) {
					t.Errorf("%s: %s: [%s] is not a doc link go/doc can resolve (an unknown name, or a package not imported here: write [importpath.Name] or drop the brackets)", dir, where, m[2])
				}
			}, func(l *comment.DocLink) {
				path := l.ImportPath
				if path == "" {
					path = importPath
				}
				name := l.Name
				if l.Recv != "" {
					name = l.Recv + "." + l.Name
				}
				if name == "" { // a link to a package
					if _, err := os.Stat(filepath.Join(strings.TrimPrefix(path, module+"/"))); strings.HasPrefix(path, module+"/") && err != nil {
						t.Errorf("%s: %s: [%s] names a package that does not exist", dir, where, path)
					}
					return
				}
				if !namesOf(t, path)[name] {
					t.Errorf("%s: %s: [%s] links to %s.%s, which does not exist", dir, where, strings.TrimPrefix(l.DefaultURL(""), "/"), path, name)
				}
			})
		}
	}
}
