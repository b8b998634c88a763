package evidence

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Extension ends the name of every checkpoint file a DirSink writes.
const Extension = ".checkpoint"

// Sink stores signed checkpoints. Put is called by one goroutine at a time
// unless the implementation says otherwise; it returns once the checkpoint
// is durable where the sink keeps it, with a name for it.
type Sink interface {
	Put(ctx context.Context, c *Checkpoint) (name string, err error)
}

// DirSink writes each checkpoint to its own file in Dir (created when
// missing), named by its time and root:
// 20060102T150405.000000Z-<first 8 bytes of the root in hex>.checkpoint.
// The file is written to a temporary name, synced and renamed, so a crash
// never leaves half a checkpoint under a checkpoint's name. Safe for
// concurrent use.
type DirSink struct {
	Dir string
}

// Put writes c into the directory and returns the file's path.
func (d DirSink) Put(ctx context.Context, c *Checkpoint) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(d.Dir, 0o755); err != nil {
		return "", err
	}
	name := filepath.Join(d.Dir, c.MadeAt.UTC().Format("20060102T150405.000000Z")+"-"+short(c.Root)+Extension)
	tmp, err := os.CreateTemp(d.Dir, ".checkpoint-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := c.WriteTo(tmp); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return "", err
	}
	if dir, err := os.Open(d.Dir); err == nil {
		_ = dir.Sync()
		dir.Close()
	}
	return name, nil
}

// WriterSink writes each checkpoint, in the file format, to W. Not safe for
// concurrent use unless W is.
type WriterSink struct {
	W io.Writer
}

// Put writes c to the writer; the name is empty.
func (w WriterSink) Put(ctx context.Context, c *Checkpoint) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	_, err := c.WriteTo(w.W)
	return "", err
}

// ListDir returns the paths of the checkpoint files in dir (names ending
// in Extension), oldest first (by name). A dir without any fails: there
// is nothing to verify.
func ListDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("evidence: reading the checkpoint directory: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), Extension) && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("evidence: %s holds no checkpoint files (*%s); make one with `scribe checkpoint -key FILE -out %s`", dir, Extension, dir)
	}
	slices.Sort(out)
	return out, nil
}

// ReadFile decodes the checkpoint file at path (see Decode; call Verify).
func ReadFile(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
