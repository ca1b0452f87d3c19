package unstuck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Database drivers, by the import path prefix of their packages.
const (
	depPgx    = "github.com/jackc/pgx/"
	depMySQL  = "github.com/go-sql-driver/mysql"
	depSQLite = "modernc.org/sqlite"
)

// libraryDeps lists, for each package of the library an application
// embeds, the database drivers it must not link: a store links only its
// own database's driver, and the engine none (docs/decisions/0007-one-module-each-driver-links-its-database.md).
var libraryDeps = map[string][]string{
	"idem":                  {depPgx, depMySQL, depSQLite},
	"decision":              {depPgx, depMySQL, depSQLite},
	"idem/idemsqlite":       {depPgx, depMySQL},
	"idem/idemmysql":        {depPgx, depSQLite},
	"idem/idempgx":          {depMySQL, depSQLite},
	"saga/sagasqlite":       {depPgx, depMySQL},
	"saga/sagapgx":          {depMySQL, depSQLite},
	"migrate":               {depPgx, depMySQL, depSQLite},
	"migrate/migratepgx":    {depMySQL, depSQLite},
	"migrate/migratesqlite": {depPgx, depMySQL, depSQLite},
	"migrate/migratemysql":  {depPgx, depSQLite},
}

// TestLibraryLinksOnlyItsDatabase: go list -deps of each library package
// names none of the drivers it must not link, and none of the module
// root's internal packages (the console's).
func TestLibraryLinksOnlyItsDatabase(t *testing.T) {
	t.Parallel()
	for pkg, banned := range libraryDeps {
		t.Run(strings.ReplaceAll(pkg, "/", "_"), func(t *testing.T) {
			t.Parallel()
			out, err := exec.Command("go", "list", "-deps", "./"+pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v\n%s", pkg, err, out)
			}
			for dep := range strings.FieldsSeq(string(out)) {
				for _, b := range banned {
					if strings.HasPrefix(dep, b) {
						t.Errorf("%s links %s", pkg, dep)
					}
				}
				if strings.HasPrefix(dep, modulePath+"/internal/") {
					t.Errorf("%s links the console's %s", pkg, dep)
				}
			}
		})
	}
}

const modulePath = "github.com/unstuckhq/unstuck"

// TestLibraryImportsNoRootInternal: no Go file under idem/, saga/,
// migrate/ or decision/, tests included, and none under unstucktest/, the test support
// they share with the console, imports a package under the module root's
// internal/, which is the console's: the library is to become a module of
// its own, which cannot see it (docs/decisions/0007-one-module-each-driver-links-its-database.md).
// What the library shares lives in idem/internal, saga/internal, the
// public migrate packages or unstucktest.
func TestLibraryImportsNoRootInternal(t *testing.T) {
	t.Parallel()
	for _, root := range []string{"idem", "saga", "migrate", "decision", "unstucktest"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if p == modulePath+"/internal" || strings.HasPrefix(p, modulePath+"/internal/") {
					t.Errorf("%s imports %s", path, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
