package evidence

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/scribe-es/scribe/journal"
)

// bodyDomain opens a checkpoint file's binary body.
const bodyDomain = "scribe.checkpoint.body.v1"

// maxName bounds a partition or tag read from a file (a corrupt length
// must not allocate gigabytes).
const maxName = 1 << 16

// WriteTo writes c as a checkpoint file: the signed statement as one line
// of JSON ending in "\n", then the binary body:
//
//	str("scribe.checkpoint.body.v1")
//	per stream, in order:
//	  str(partition) str(tag) uint64 version  head (32)  root (32)
//	  version times: event ID (16)  chain hash (32)
//
// (str: uint64 big-endian length, then the bytes). `head -1 FILE` shows the
// statement. It returns the bytes written.
func (c *Checkpoint) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: bufio.NewWriterSize(w, 1<<16)}
	line, err := json.Marshal(c.Signed)
	if err != nil {
		return 0, err
	}
	cw.Write(append(line, '\n'))
	cw.Write(appendStr(nil, bodyDomain))
	var buf []byte
	for i := range c.Streams {
		s := &c.Streams[i]
		buf = appendStr(buf[:0], s.Partition)
		buf = appendStr(buf, string(s.Tag))
		buf = binary.BigEndian.AppendUint64(buf, s.Version)
		buf = append(buf, s.Head[:]...)
		buf = append(buf, s.Root[:]...)
		for _, l := range s.Leaves {
			buf = append(buf, l.ID[:]...)
			buf = append(buf, l.Hash[:]...)
		}
		cw.Write(buf)
	}
	if cw.err == nil {
		cw.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, cw.err
}

type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}

// Decode reads a checkpoint file written by WriteTo. It checks the format
// and the encoding, not the signature or the tree: call Verify.
func Decode(r io.Reader) (*Checkpoint, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: the file does not open with a statement line: %v", ErrCorrupt, err)
	}
	c := &Checkpoint{}
	if err := json.Unmarshal(line, &c.Signed); err != nil {
		return nil, err
	}
	d := decoder{r: br}
	if dom := d.str(); d.err == nil && dom != bodyDomain {
		return nil, fmt.Errorf("%w: the body's format is %q; this scribe reads %q", ErrFormat, dom, bodyDomain)
	}
	for i := uint64(0); i < c.Statement.Streams && d.err == nil; i++ {
		var s Stream
		s.Partition = d.str()
		s.Tag = journal.Tag(d.str())
		s.Version = d.u64()
		d.read(s.Head[:])
		d.read(s.Root[:])
		if d.err != nil {
			break
		}
		if s.Version > c.Statement.Events {
			return nil, fmt.Errorf("%w: stream %s claims %d events, more than the statement's %d", ErrCorrupt, s.ID(), s.Version, c.Statement.Events)
		}
		s.Leaves = make([]Leaf, s.Version)
		var b [48]byte
		for k := range s.Leaves {
			d.read(b[:])
			copy(s.Leaves[k].ID[:], b[:16])
			copy(s.Leaves[k].Hash[:], b[16:])
		}
		c.Streams = append(c.Streams, s)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: the body ends early or is malformed: %v", ErrCorrupt, d.err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("%w: bytes follow the last stream", ErrCorrupt)
	}
	return c, nil
}

type decoder struct {
	r   io.Reader
	err error
}

func (d *decoder) read(b []byte) {
	if d.err == nil {
		_, d.err = io.ReadFull(d.r, b)
	}
}

func (d *decoder) u64() uint64 {
	var b [8]byte
	d.read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

func (d *decoder) str() string {
	n := d.u64()
	if d.err != nil {
		return ""
	}
	if n > maxName {
		d.err = fmt.Errorf("a name of %d bytes", n)
		return ""
	}
	b := make([]byte, n)
	d.read(b)
	return string(b)
}
