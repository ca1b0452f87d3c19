package ops

import "time"

// SetNow replaces b's clock (expiry tests).
func (b *Bulks[TTx]) SetNow(now func() time.Time) { b.now = now }
