package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every ```go block of README.md and docs/*.md is an excerpt of a
// compiled Go file.
func TestDocsSnippetsAreExcerptsOfCompiledCode(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no pages in docs/")
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
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

// Every relative link of README.md and docs/*.md names a file of the
// repository, and an anchor names a heading of its page.
func TestDocsLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	checked := 0
	for _, page := range pages {
		links, err := Links(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			checked++
			path, anchor, _ := strings.Cut(l.Target, "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), path)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: the link %s names no file of the repository (paths are relative to the page)", l.File, l.Line, l.Target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			anchors, err := Anchors(target)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors[anchor] {
				t.Errorf("%s:%d: the link %s names no heading of %s", l.File, l.Line, l.Target, target)
			}
		}
	}
	t.Logf("%d links in %d pages checked", checked, len(pages))
}

// Links skips code and absolute links; Anchors slugs headings as GitHub does.
func TestLinksAndAnchors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.md")
	page := "# The `scribe` CLI: a tour\n\nSee [it](#the-scribe-cli-a-tour), [b](b.md#x), [web](https://example.com) and `[no](code)`.\n\n```\n[no](fence)\n```\n"
	if err := os.WriteFile(p, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	links, err := Links(p)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range links {
		got = append(got, l.Target)
	}
	if strings.Join(got, " ") != "#the-scribe-cli-a-tour b.md#x" {
		t.Errorf("links: %q", got)
	}
	anchors, err := Anchors(p)
	if err != nil {
		t.Fatal(err)
	}
	if !anchors["the-scribe-cli-a-tour"] || len(anchors) != 1 {
		t.Errorf("anchors: %v", anchors)
	}
}
