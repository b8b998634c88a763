package usercode

import (
	"errors"
	"strings"
	"testing"

	"github.com/scribe-es/scribe/journal"
)

func TestRun(t *testing.T) {
	want := errors.New("rejected")
	if err := Run(journal.StreamID{}, "", "decide", func() error { return want }); err != want {
		t.Fatalf("a returned error must pass through as is, got %v", err)
	}
	err := Run(journal.StreamID{}, "Transfer", "evolve", func() error { panic("boom") })
	var pe *PanicError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPanic) {
		t.Fatalf("a panic must become a *PanicError matching ErrPanic, got %v", err)
	}
	if pe.Command != "Transfer" || pe.Phase != "evolve" || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("the PanicError must name the command, phase, value and stack: %+v", pe)
	}
	if !strings.Contains(err.Error(), `DCB command "Transfer"`) {
		t.Fatalf("message: %s", err)
	}
}
