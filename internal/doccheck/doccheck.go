package doccheck

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
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

// Link is a relative link of a Markdown file: a path (empty for the file
// itself) and an optional anchor.
type Link struct {
	File   string
	Line   int
	Target string
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Links returns the relative links of the Markdown file at path (links
// with a scheme, such as https:, are left out), outside code blocks and
// code spans.
func Links(path string) ([]Link, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Link
	fence := false
	for n, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(withoutCodeSpans(line), -1) {
			t := m[1]
			if i := strings.Index(t, ":"); i > 0 && !strings.ContainsAny(t[:i], "/#.") {
				continue // https:, mailto: …
			}
			out = append(out, Link{File: path, Line: n + 1, Target: t})
		}
	}
	return out, nil
}

// withoutCodeSpans blanks the `code spans` of a line.
func withoutCodeSpans(line string) string {
	parts := strings.Split(line, "`")
	for i := 1; i < len(parts); i += 2 {
		parts[i] = strings.Repeat(" ", len(parts[i]))
	}
	return strings.Join(parts, "`")
}

// Anchors returns the anchors GitHub gives the headings of the Markdown
// file at path: lower case, punctuation dropped, spaces as hyphens.
func Anchors(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	fence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(h, " ") {
			continue
		}
		var s strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				s.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
				s.WriteRune(r)
			}
		}
		out[s.String()] = true
	}
	return out, nil
}
