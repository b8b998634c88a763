package doccheck

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Snippet is one ```go block of a Markdown file.
type Snippet struct {
	File string
	Line int // the line of the opening fence
	Code string
}

// Snippets returns the ```go blocks of the Markdown file at path.
func Snippets(path string) ([]Snippet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Snippet
	var cur *Snippet
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```go":
			cur = &Snippet{File: path, Line: n}
			b.Reset()
		case cur != nil && trimmed == "```":
			cur.Code = b.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a ```go block is not closed", path, cur.Line)
	}
	return out, sc.Err()
}

var spaces = regexp.MustCompile(`[ \t]+`)

// Normalize is code without blank lines, each line trimmed and its runs of
// spaces and tabs collapsed to one space: what gofmt's alignment and the
// page's indentation may change.
func Normalize(code string) string {
	var b strings.Builder
	for _, l := range strings.Split(code, "\n") {
		l = strings.TrimSpace(spaces.ReplaceAllString(l, " "))
		if l == "" {
			continue
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// GoSources returns the normalized text of every .go file under root
// (vendor and hidden directories skipped), by path.
func GoSources(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "vendor" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = Normalize(string(b))
		return nil
	})
	return out, err
}

// Source returns the path of a Go source whose text holds s's code as an
// excerpt, "" when none does.
func Source(s Snippet, sources map[string]string) string {
	code := Normalize(s.Code)
	if code == "" {
		return ""
	}
	for p, src := range sources {
		if strings.Contains("\n"+src, "\n"+code) {
			return p
		}
	}
	return ""
}
