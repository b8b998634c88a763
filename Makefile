.PHONY: test bank bench

# The test command: go vet, gofmt check, go test -race ./... against Postgres
# (starts a throwaway server when none answers; see scripts/test.sh).
test:
	./scripts/test.sh

# Runs the bank example on the in-memory journal.
bank:
	go run ./examples/bank
