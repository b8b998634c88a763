package cluster

import (
	"context"
	"fmt"
	"log/slog"
)

// errorOnly drops protoactor-go's cluster records below Error: membership
// changes are reported by Scribe's own logs. It never formats an attribute
// that holds an arbitrary value (protoactor-go logs the protobuf messages it
// failed to send, which its gossip actor may be mutating meanwhile: printing
// them races with that write); such an attribute is logged as its type, an
// error as its text.
type errorOnly struct{ slog.Handler }

func (w errorOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError && w.Handler.Enabled(ctx, l)
}

func (w errorOnly) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(safeAttr(a))
		return true
	})
	return w.Handler.Handle(ctx, out)
}

// safeAttr replaces an arbitrary value by its type (an error by its text),
// in groups too.
func safeAttr(a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			return slog.String(a.Key, err.Error())
		}
		return slog.String(a.Key, fmt.Sprintf("%T", a.Value.Any()))
	case slog.KindGroup:
		g := a.Value.Group()
		safe := make([]any, len(g))
		for i, m := range g {
			safe[i] = safeAttr(m)
		}
		return slog.Group(a.Key, safe...)
	case slog.KindLogValuer:
		return safeAttr(slog.Attr{Key: a.Key, Value: a.Value.Resolve()})
	}
	return a
}

func (w errorOnly) WithAttrs(as []slog.Attr) slog.Handler {
	safe := make([]slog.Attr, len(as))
	for i, a := range as {
		safe[i] = safeAttr(a)
	}
	return errorOnly{w.Handler.WithAttrs(safe)}
}

func (w errorOnly) WithGroup(n string) slog.Handler { return errorOnly{w.Handler.WithGroup(n)} }
