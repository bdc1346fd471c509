package retryqueue

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	"github.com/floodgate-go/floodgate/partner"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MigrateResult is what [Migrate] did.
type MigrateResult struct {
	// Moved counts the messages moved from the bare stream subject to the
	// route's subject, retry and dead-letter streams together.
	Moved int `json:"moved"`
	// DeletedConsumers lists the unfiltered consumers deleted from the
	// retry stream (the previous release's drainer), as "stream/consumer".
	DeletedConsumers []string `json:"deleted_consumers,omitempty"`
}

// Migrate moves the retry and dead-letter streams of cfg's topics from the
// previous release's layout (the stream's name as its only subject, one
// unfiltered drainer consumer) to the route layout ([RetryStreamConfig]),
// losing no message. Run it once the previous release's services and
// drainers are stopped, with the Config of the service that owned the
// streams (the previous release gave every service on a retry topic one
// stream, so its messages cannot be told apart: they all go to cfg's route,
// Service and Partner with defaults applied). Then start the new release.
//
// For each stream it deletes the retry stream's unfiltered consumers (a
// work-queue stream keeps their unacked messages), adds the subjects
// topic.> beside the bare topic, moves every message stored under the bare
// topic to cfg's route subject (headers kept, route metadata set; the copy
// confirmed before the original is deleted, so a crash leaves a duplicate,
// never a loss), sets the subjects to topic.> alone, and moves again what
// arrived meanwhile. It is idempotent: run it again after a failure. A
// stream that does not exist or already has the route layout is left
// alone.
//
// It returns what it did so far, and an error wrapping [ErrInvalidConfig]
// for invalid names or no Service (nor Source), or the JetStream error. A
// message that does not fit its stream with the route metadata (it filled
// the server's max_payload) is left in place and reported in the error.
func Migrate(ctx context.Context, js jetstream.JetStream, cfg Config) (MigrateResult, error) {
	var res MigrateResult
	cfg.setDefaults()
	if err := cfg.validateTopics(); err != nil {
		return res, err
	}
	if cfg.Service == "" || !headerSafe(cfg.Service) {
		return res, fmt.Errorf("%w: Service, or Source (from which it is derived), is required and printable: the route the previous release's messages move to", ErrInvalidConfig)
	}
	q := &Queue{cfg: cfg}
	q.service = partner.Token(cfg.Service)
	r := q.routeOf(cfg.Partner)
	for i, name := range []string{cfg.RetryTopic, cfg.DeadLetterTopic} {
		st, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("retryqueue: migrate: stream %q: %w", name, err)
		}
		sc := st.CachedInfo().Config
		if !slices.Contains(sc.Subjects, name) {
			continue // the route layout already
		}
		if i == 0 {
			if err := deleteUnfiltered(ctx, js, st, &res); err != nil {
				return res, err
			}
		}
		all := StreamSubjects(name)
		if !slices.Contains(sc.Subjects, all) {
			sc.Subjects = append(sc.Subjects, all)
			if _, err := js.UpdateStream(ctx, sc); err != nil {
				return res, fmt.Errorf("retryqueue: migrate: add subject %q to stream %q: %w", all, name, err)
			}
		}
		if err := q.moveBare(ctx, js, st, name, r, &res); err != nil {
			return res, err
		}
		sc.Subjects = []string{all}
		if _, err := js.UpdateStream(ctx, sc); err != nil {
			return res, fmt.Errorf("retryqueue: migrate: set subjects of stream %q to %q: %w", name, all, err)
		}
		// What the previous release published between the move and the
		// update is still stored under the bare subject.
		if err := q.moveBare(ctx, js, st, name, r, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// deleteUnfiltered deletes st's consumers without a filter subject.
func deleteUnfiltered(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, res *MigrateResult) error {
	name := st.CachedInfo().Config.Name
	lister := st.ListConsumers(ctx)
	var old []string
	for ci := range lister.Info() {
		if ci.Config.FilterSubject == "" && len(ci.Config.FilterSubjects) == 0 {
			old = append(old, ci.Name)
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("retryqueue: migrate: list consumers of %q: %w", name, err)
	}
	for _, c := range old {
		if err := js.DeleteConsumer(ctx, name, c); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("retryqueue: migrate: delete consumer %q of %q: %w", c, name, err)
		}
		res.DeletedConsumers = append(res.DeletedConsumers, name+"/"+c)
	}
	return nil
}

// moveBare moves every message of st stored under the bare subject name to
// route r: publish confirmed, then delete.
func (q *Queue) moveBare(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, name string, r route, res *MigrateResult) error {
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("retryqueue: migrate: stream %q info: %w", name, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	subject := r.subject(name)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		raw, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("retryqueue: migrate: %q seq %d: %w", name, seq, err)
		}
		if raw.Subject != name {
			continue
		}
		m := nats.NewMsg(subject)
		m.Data = raw.Data
		for k, vs := range raw.Header {
			m.Header[k] = slices.Clone(vs)
		}
		m.Header.Set(MetaService, q.cfg.Service)
		m.Header.Set(MetaPartnerToken, r.partnerToken)
		m.Header.Del(MetaPartner)
		m.Header.Del(MetaPartnerBase64)
		if headerSafe(r.partnerKey) {
			m.Header.Set(MetaPartner, r.partnerKey)
		} else {
			m.Header.Set(MetaPartnerBase64, base64.RawURLEncoding.EncodeToString([]byte(r.partnerKey)))
		}
		pctx, cancel := context.WithTimeout(ctx, q.cfg.PublishTimeout)
		_, err = js.PublishMsg(pctx, m)
		cancel()
		if err != nil {
			return fmt.Errorf("retryqueue: migrate: move %q seq %d to %q (left in place): %w", name, seq, subject, err)
		}
		if err := st.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("retryqueue: migrate: %q seq %d is copied to %q but not deleted (run Migrate again; a duplicate): %w", name, seq, subject, err)
		}
		res.Moved++
	}
	return nil
}
