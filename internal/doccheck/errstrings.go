package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxErrorText is the longest error text the project writes in one
// literal: an error says what went wrong and what to do in a sentence or
// two, not a page.
const MaxErrorText = 200

// LongError is an error text of the module longer than MaxErrorText.
type LongError struct {
	// Pos is the file and line of the text.
	Pos string
	// Len is its length in bytes, format verbs included.
	Len int
}

// LongErrors returns, for every non-test .go file under root (vendor and
// hidden directories skipped), the error texts longer than max: the
// constant first argument of errors.New and fmt.Errorf, and that of
// fmt.Sprintf inside an Error method. A constant is a literal or literals
// joined with +. The values a format puts in are not counted: they are the
// caller's (a stream ID, a cause).
func LongErrors(root string, max int) ([]LongError, error) {
	var out []LongError
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "vendor" || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return fmt.Errorf("doccheck: parsing %s: %w", p, err)
		}
		out = append(out, longErrorsOf(fset, f, max)...)
		return nil
	})
	return out, err
}

func longErrorsOf(fset *token.FileSet, f *ast.File, max int) []LongError {
	var out []LongError
	check := func(call *ast.CallExpr, inError bool) {
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || len(call.Args) == 0 {
			return
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return
		}
		switch pkg.Name + "." + sel.Sel.Name {
		case "errors.New", "fmt.Errorf":
		case "fmt.Sprintf":
			if !inError {
				return
			}
		default:
			return
		}
		if s, ok := constantText(call.Args[0]); ok && len(s) > max {
			out = append(out, LongError{Pos: fset.Position(call.Args[0].Pos()).String(), Len: len(s)})
		}
	}
	for _, decl := range f.Decls {
		fn, isFunc := decl.(*ast.FuncDecl)
		inError := isFunc && fn.Recv != nil && fn.Name.Name == "Error"
		ast.Inspect(decl, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				check(call, inError)
			}
			return true
		})
	}
	return out
}

// constantText returns the text of a string literal or of literals joined
// with +.
func constantText(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		l, ok := constantText(e.X)
		if !ok {
			return "", false
		}
		r, ok := constantText(e.Y)
		return l + r, ok
	case *ast.ParenExpr:
		return constantText(e.X)
	}
	return "", false
}
