package telemetry

import "go.opentelemetry.io/otel/attribute"

// InstrumentationName is the OpenTelemetry scope of Scribe's spans and
// metrics.
const InstrumentationName = "github.com/scribe-es/scribe"

// The names of every span, attribute and metric the engine records, in one
// place (docs/operations.md, "Observability", lists them for users). Span
// names follow Scribe's scheme scribe.<component>.<operation>.
const (
	// The stream actors' spans (component "stream").
	SpanStreamExecute = "scribe.stream.execute"
	SpanStreamDecide  = "scribe.stream.decide"
	SpanStreamAppend  = "scribe.stream.append"
	SpanStreamRecover = "scribe.stream.recover"
	SpanStreamReserve = "scribe.stream.reserve"

	// A DCB command's spans (component "dcb"): execute is the parent of one
	// reserve per tag, read (the fold), decide, append, and confirm or
	// cancel.
	SpanDCBExecute = "scribe.dcb.execute"
	SpanDCBReserve = "scribe.dcb.reserve"
	SpanDCBRead    = "scribe.dcb.read"
	SpanDCBDecide  = "scribe.dcb.decide"
	SpanDCBAppend  = "scribe.dcb.append"
	SpanDCBConfirm = "scribe.dcb.confirm"
	SpanDCBCancel  = "scribe.dcb.cancel"

	AttrStream      = attribute.Key("scribe.stream")
	AttrAggregate   = attribute.Key("scribe.aggregate")
	AttrMailboxWait = attribute.Key("scribe.mailbox_wait_ms")
	AttrBatchSize   = attribute.Key("scribe.batch.size")
	AttrEvents      = attribute.Key("scribe.events")
	AttrVersion     = attribute.Key("scribe.version")
	AttrOutcome     = attribute.Key("scribe.outcome")
	AttrDuplicate   = attribute.Key("scribe.duplicate")

	MetricCommands        = "scribe.commands"
	MetricBatchSize       = "scribe.batch.size"
	MetricActiveActors    = "scribe.actors.active"
	MetricActivations     = "scribe.actors.activations"
	MetricPassivations    = "scribe.actors.passivations"
	MetricRecoveries      = "scribe.actors.recoveries"
	MetricFenceRejections = "scribe.fence.rejections"
	// MetricSnapshotsIgnored counts snapshots of another state shape.
	MetricSnapshotsIgnored = "scribe.snapshots.ignored"
	MetricRewoundStreams   = "scribe.store.rewound_streams"
	MetricLostVersions     = "scribe.store.lost_versions"
	MetricDCBCommands      = "scribe.dcb.commands"
	MetricDCBWait          = "scribe.dcb.reservation.wait"
	MetricDCBGateWait      = "scribe.dcb.gate.wait"
	MetricDCBConflicts     = "scribe.dcb.conflicts"
)

// Command outcomes: the scribe.outcome attribute of scribe.commands and
// scribe.dcb.commands.
const (
	OutcomeOK          = "ok"
	OutcomeDuplicate   = "duplicate"
	OutcomeDomainError = "domain_error"
	OutcomeError       = "error"
	OutcomeCanceled    = "canceled"
	OutcomeOverloaded  = "overloaded"
)
