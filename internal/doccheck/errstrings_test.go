package doccheck

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// No error text of the module is over MaxErrorText characters.
func TestNoErrorTextOverTheLimit(t *testing.T) {
	long, err := LongErrors(filepath.Join("..", ".."), MaxErrorText)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range long {
		t.Errorf("%s: an error text of %d characters (at most %d): say what went wrong and what to do in fewer words", l.Pos, l.Len, MaxErrorText)
	}
}

// The scan finds long texts in errors.New, fmt.Errorf (also joined with +)
// and an Error method's fmt.Sprintf, and only there.
func TestLongErrorsFindsTheLongTexts(t *testing.T) {
	long := strings.Repeat("x", 30)
	src := `package p

import ("errors"; "fmt")

type e struct{}

func (e) Error() string { return fmt.Sprintf("` + long + `" + "` + long + `%d", 1) }

func f() {
	_ = errors.New("` + long + long + `")
	_ = fmt.Errorf("` + long + `" + ("` + long + `") + "%w", nil)
	_ = fmt.Sprintf("` + long + long + `") // not an error text
	_ = errors.New("short")
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := longErrorsOf(fset, f, 50)
	if len(got) != 3 {
		t.Fatalf("found %d long texts, want 3 (Error's Sprintf, errors.New, fmt.Errorf): %v", len(got), got)
	}
	for _, l := range got {
		if l.Len < 60 {
			t.Errorf("%s: length %d", l.Pos, l.Len)
		}
	}
}
