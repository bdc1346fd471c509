package asyncmdn

import (
	"context"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

// Claim and Remove expose the store's revision-checked writes to the
// black-box tests.
func (s *Store) Claim(ctx context.Context, p *as2.PendingReceipt, rev uint64, until time.Time) (uint64, error) {
	return s.claim(ctx, p, rev, until)
}

func (s *Store) Remove(ctx context.Context, p *as2.PendingReceipt, rev uint64) error {
	return s.remove(ctx, p, rev)
}
