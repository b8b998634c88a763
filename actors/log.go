package actors

import (
	"context"
	"log/slog"
)

// warnOnly drops protoactor-go's records below Warn.
type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{w.Handler.WithAttrs(as)} }
func (w warnOnly) WithGroup(n string) slog.Handler       { return warnOnly{w.Handler.WithGroup(n)} }
