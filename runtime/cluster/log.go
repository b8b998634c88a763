package cluster

import (
	"context"
	"log/slog"
)

// errorOnly drops protoactor-go's cluster records below Error: membership
// changes are reported by Scribe's own logs.
type errorOnly struct{ slog.Handler }

func (w errorOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError && w.Handler.Enabled(ctx, l)
}

func (w errorOnly) WithAttrs(as []slog.Attr) slog.Handler { return errorOnly{w.Handler.WithAttrs(as)} }
func (w errorOnly) WithGroup(n string) slog.Handler       { return errorOnly{w.Handler.WithGroup(n)} }
