package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// openPostgres connects a pool of o.Pool connections and creates a fresh schema
// for one measurement; closing the backend drops the schema and the pool.
func openPostgres(ctx context.Context, o options) (*backend, error) {
	cfg, err := pgxpool.ParseConfig(o.DB)
	if err != nil {
		return nil, fmt.Errorf("-db: %w (want a URL such as postgres://user@host:5432/db?sslmode=disable)", err)
	}
	cfg.MaxConns = int32(o.Pool)
	counter := &statementCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("-db: connect: %w", err)
	}
	b := &backend{Pool: pool, Statements: counter, closers: []func(context.Context) error{
		func(context.Context) error { pool.Close(); return nil },
	}}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	b.Schema = o.Prefix + hex.EncodeToString(rnd[:])
	ident := pgx.Identifier{b.Schema}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		_ = b.close(ctx)
		return nil, fmt.Errorf("-db: create schema %s: %w", b.Schema, err)
	}
	b.closers = append(b.closers, func(ctx context.Context) error {
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", b.Schema, err)
		}
		return nil
	})
	if err := b.migrateJournal(ctx); err != nil {
		_ = b.close(ctx)
		return nil, err
	}
	return b, nil
}
