package doccheck

import (
	"os"
	"path/filepath"
	"testing"
)

// Every ```go block of docs/*.md is an excerpt of a compiled Go file.
func TestDocsSnippetsAreExcerptsOfCompiledCode(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no pages in docs/")
	}
	sources, err := GoSources(root)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, page := range pages {
		snippets, err := Snippets(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range snippets {
			checked++
			if Source(s, sources) == "" {
				t.Errorf("%s:%d: this ```go block is in no Go file of the module; copy it from an example or test that compiles (or fix it where it drifted):\n%s", s.File, s.Line, s.Code)
			}
		}
	}
	t.Logf("%d snippets in %d pages checked", checked, len(pages))
}

// The check finds an excerpt and refuses a snippet that is in no file.
func TestSourceFindsExcerptsOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n\nfunc F() int {\n\treturn   1\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sources, err := GoSources(dir)
	if err != nil {
		t.Fatal(err)
	}
	if Source(Snippet{Code: "func F() int {\n    return 1\n}\n"}, sources) == "" {
		t.Error("an excerpt (other indentation and spacing) was not found")
	}
	if Source(Snippet{Code: "func F() int {\n\treturn 2\n}\n"}, sources) != "" {
		t.Error("a snippet that differs from the code was found")
	}
	if Source(Snippet{Code: "return 1\n}\nfunc G() {}\n"}, sources) != "" {
		t.Error("a snippet running past the file's code was found")
	}
}
