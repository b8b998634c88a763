// Package natssink is a projection.Sink that publishes events to NATS
// JetStream, for projection.NewPublisher. It is its own package so that
// programs that publish elsewhere (projection.WebhookSink) do not import the
// NATS client.
//
// # Messages
//
// Each event becomes one JetStream message whose body is the JSON
// projection.Message (the body projection.WebhookSink posts) and whose
// headers are:
//
//	Nats-Msg-Id        the event ID: JetStream drops a second message with
//	                   the same ID inside the stream's duplicate window
//	Content-Type       application/json
//	Scribe-Event-Type  the event type
//	Scribe-Position    the event's journal position ("commit.seq")
//
// The subject is Config.Subject for every event, or Config.SubjectPrefix,
// a dot, and the event type ("bank.events.MoneyDeposited").
//
// # Delivery
//
// Publish returns nil only once the stream stored the message: it waits for
// JetStream's publish acknowledgement (an acknowledgement of a duplicate
// counts, the stream already holds the event). The publisher delivers
// at least once: after a crash it publishes again the events it published
// but had not checkpointed. With the event ID as the message ID the broker
// drops those repeats, so the stream holds each event once, provided the
// stream's duplicate window (StreamConfig.Duplicates, default two minutes)
// is longer than a publisher's outage: the time from a crash until a
// standby or restarted publisher has published again everything the dead
// one had not checkpointed. Set it to cover your restarts; consumers that
// must never see a repeat can also deduplicate by the Nats-Msg-Id header.
//
// The sink creates no stream (no DDL in a constructor): create a stream whose
// subjects include the sink's subjects, with a duplicate window, before
// publishing.
package natssink
