module github.com/scribe-es/scribe

go 1.26.0

require github.com/google/uuid v1.6.0

require github.com/asynkron/protoactor-go v0.0.0-20250909165758-e952b3c0850e // indirect
